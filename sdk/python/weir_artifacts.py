"""Artifacts for Weir operators in Python: the named files deployed with
this operator version (``weir deploy op.wasm --artifact model=model.onnx``,
or ``[operator] artifacts = { model = "model.onnx" }``). Their digests are
recorded with every epoch, so a replay reads the same bytes; a new model
alone is a new version, shadowed and rolled back like code. Read them in
``init``: they never change for an instance.

Put this file on componentize-py's module path (``-p``) next to your
operator; every Weir world imports ``weir:operator/artifacts``::

    from weir_artifacts import require

    def init(self, config):
        self.weights = parse(require("model"))
"""

from componentize_py_types import Err
from wit_world.imports import artifacts as _artifacts
from wit_world.imports import types as t


def get(name):
    """The bytes of artifact ``name``, or None if this version has none."""
    return _artifacts.get(name)


def require(name):
    """The bytes of artifact ``name``; raises the config error `init` should
    return when the version was deployed without it."""
    data = _artifacts.get(name)
    if data is None:
        raise Err(t.OperatorError_InvalidConfig(
            f"this version has no artifact `{name}` (deploy it with --artifact {name}=FILE)"))
    return data


def digest(name):
    """The content digest (``sha256:...``) of artifact ``name``, as
    ``offsets/N`` records it; None if there is no such artifact."""
    return _artifacts.digest(name)


def names():
    """This version's artifact names, sorted."""
    return list(_artifacts.names())
