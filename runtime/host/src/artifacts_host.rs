//! Host side of `weir:operator/artifacts`: the named files of the version
//! an instance runs ([`crate::EpochEnv::artifacts`]), as `offsets/N`
//! records them. Copying an artifact into the guest counts against its
//! memory limit like any allocation of the guest's.

use super::bindings::weir::operator::artifacts::Host;
use super::store::HostState;

impl Host for HostState {
    fn get(&mut self, name: String) -> Option<Vec<u8>> {
        self.env.artifacts.get(&name).map(|b| b.as_ref().clone())
    }

    fn digest(&mut self, name: String) -> Option<String> {
        self.env.artifacts.digest(&name).map(|d| d.to_string())
    }

    fn names(&mut self) -> Vec<String> {
        self.env.artifacts.digests().into_keys().collect()
    }
}
