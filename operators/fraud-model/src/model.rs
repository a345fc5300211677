//! The fraud model: an ONNX graph (gradient-boosted trees exported by
//! `tools/model/train.py`) evaluated by tract, in pure Rust. The same code
//! runs inside the component and natively (the tests compare the two).

use crate::features::WIDTH;
use tract_onnx::prelude::*;

type Plan = SimplePlan<TypedFact, Box<dyn TypedOp>, TypedModel>;

/// A loaded model, ready to score rows of features.
pub struct Model {
    plan: Plan,
}

impl Model {
    /// Parses and optimises an ONNX model whose input is a float matrix of
    /// `N × WIDTH` features and whose one output holds the class
    /// probabilities (`N × 2`, fraud second), as `tools/model/train.py`
    /// writes it.
    pub fn load(onnx: &[u8]) -> Result<Model, String> {
        let plan = Self::plan(onnx).map_err(|e| format!("the model does not load: {e:#}"))?;
        Ok(Model { plan })
    }

    fn plan(onnx: &[u8]) -> TractResult<Plan> {
        let mut model = tract_onnx::onnx().model_for_read(&mut std::io::Cursor::new(onnx))?;
        let rows = model.symbols.sym("N");
        model.set_input_fact(0, f32::fact([rows.to_dim(), WIDTH.to_dim()]).into())?;
        model.into_optimized()?.into_runnable()
    }

    /// The fraud probability of each row (`rows.len()` must be a multiple
    /// of `WIDTH`).
    pub fn score(&self, rows: &[f32]) -> Result<Vec<f32>, String> {
        let n = rows.len() / WIDTH;
        if n == 0 {
            return Ok(Vec::new());
        }
        let input = tract_ndarray::Array2::from_shape_vec((n, WIDTH), rows.to_vec())
            .map_err(|e| format!("features: {e}"))?;
        let out = self
            .plan
            .run(tvec!(Tensor::from(input).into()))
            .map_err(|e| format!("the model failed: {e:#}"))?;
        let probs = out
            .first()
            .ok_or("the model has no output")?
            .to_array_view::<f32>()
            .map_err(|e| format!("the probabilities are not f32: {e:#}"))?;
        let shape = probs.shape().to_vec();
        if shape != [n, 2] {
            return Err(format!("probabilities of shape {shape:?}, not [{n}, 2]"));
        }
        Ok((0..n).map(|r| probs[[r, 1]]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &[u8] = include_bytes!("../model/model.onnx");

    #[test]
    fn the_trained_model_scores_a_takeover_above_an_honest_payment() {
        let model = Model::load(MODEL).unwrap();
        let honest = [42.0, 0.0, 0.0, 0.0, 1.0, 0.0];
        let takeover = [1500.0, 1.0, 1.0, 0.0, 1.0, 0.0];
        let rows: Vec<f32> = honest.iter().chain(&takeover).copied().collect();
        let many: Vec<f32> = rows.iter().copied().cycle().take(WIDTH * 20).collect();
        let all = model.score(&many).unwrap();
        let scores = model.score(&rows).unwrap();
        assert!(scores[0] < 0.1 && scores[1] > 0.5, "{scores:?}");
        assert_eq!(all[..2], scores[..]);
    }
}
