//! JSON: the run as recorded (histograms included) with each case's computed summary beside
//! it. `msgperf report` and `msgperf compare` read it back.

use super::ExportError;
use crate::report::summary::summarize;
use crate::result::RunResult;

pub const FORMAT: super::Format = super::Format {
    name: "json",
    about: "every figure, histogram, setting and the environment (read back by report and compare)",
    writes: super::Writes::File(to_json),
};

pub fn to_json(run: &RunResult) -> Result<Vec<u8>, ExportError> {
    let fail = |e| ExportError::new("the JSON result", e);
    let mut v = serde_json::to_value(run).map_err(fail)?;
    if let Some(cases) = v.get_mut("cases").and_then(|c| c.as_array_mut()) {
        for (c, r) in cases.iter_mut().zip(&run.cases) {
            let s = serde_json::to_value(summarize(r)).map_err(fail)?;
            c.as_object_mut().map(|o| o.insert("summary".into(), s));
        }
    }
    serde_json::to_vec_pretty(&v).map_err(fail)
}
