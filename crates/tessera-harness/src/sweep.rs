//! Sweeps: one parameter varied over values, every protocol at every point.

use crate::result::ResultRow;
use crate::run::{run_bench, BenchOutcome};
use crate::spec::{BenchSpec, SpecError, WorkloadSpec};

/// A parameter that a sweep can vary.
#[derive(Clone, Debug, PartialEq)]
pub struct Vary {
    pub name: String,
    pub values: Vec<f64>,
}

/// Names `--vary` accepts.
pub const PARAMS: &[&str] = &[
    "zipf",
    "clients",
    "shards",
    "multi-partition",
    "read-ratio",
    "write-ratio",
    "keys",
    "loss",
    "epoch-ms",
];

impl Vary {
    /// Parse `name=v1,v2,...`.
    pub fn parse(s: &str) -> Result<Self, SpecError> {
        let bad = |why: &str| SpecError::Invalid {
            flag: "--vary",
            value: s.to_string(),
            allowed: format!(
                "NAME=V1,V2,... with NAME one of {} ({why})",
                PARAMS.join(", ")
            ),
        };
        let (name, vals) = s.split_once('=').ok_or_else(|| bad("missing '='"))?;
        if !PARAMS.contains(&name) {
            return Err(bad("unknown NAME"));
        }
        let values = vals
            .split(',')
            .map(|v| v.trim().parse::<f64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad("values must be numbers"))?;
        if values.is_empty() {
            return Err(bad("no values"));
        }
        Ok(Vary {
            name: name.to_string(),
            values,
        })
    }

    /// Set the parameter on a spec.
    pub fn apply(&self, spec: &mut BenchSpec, v: f64) -> Result<(), SpecError> {
        let count = |v: f64| -> Result<u32, SpecError> {
            if v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64 {
                Ok(v as u32)
            } else {
                Err(SpecError::Invalid {
                    flag: "--vary",
                    value: format!("{}={v}", self.name),
                    allowed: "a positive whole number".into(),
                })
            }
        };
        match (self.name.as_str(), &mut spec.workload) {
            ("zipf", WorkloadSpec::Micro(c)) => c.zipf_theta = v,
            ("zipf", WorkloadSpec::Ycsb(c)) => c.zipf_theta = v,
            ("zipf", WorkloadSpec::Counter(c)) => c.zipf_theta = v,
            ("write-ratio", WorkloadSpec::Counter(c)) => c.write_ratio = v,
            ("keys", WorkloadSpec::Counter(c)) => c.keys = count(v)? as u64,
            ("clients", _) => spec.clients = count(v)?,
            ("shards", WorkloadSpec::Micro(c)) => c.shards = count(v)?,
            ("shards", WorkloadSpec::Ycsb(c)) => c.partitions = count(v)?,
            ("shards", WorkloadSpec::Tpcc(c)) => c.shards = count(v)?,
            ("multi-partition", WorkloadSpec::Ycsb(c)) => c.multi_partition = v,
            ("read-ratio", WorkloadSpec::Ycsb(c)) => c.read_ratio = v,
            ("loss", _) => spec.sim.loss = v,
            ("epoch-ms", _) => spec.knobs.epoch_ms = Some(count(v)? as u64),
            ("lease-us", _) => spec.knobs.lease_us = Some(count(v)? as u64),
            (name, w) => {
                return Err(SpecError::Invalid {
                    flag: "--vary",
                    value: name.to_string(),
                    allowed: format!("a parameter of workload {}", w.name()),
                })
            }
        }
        Ok(())
    }
}

/// Run every protocol at every value; `each` sees every outcome as it ends
/// (for progress and incremental output). The row carries the parameter.
pub fn sweep(
    base: &BenchSpec,
    protocols: &[String],
    vary: &Vary,
    mut each: impl FnMut(&BenchSpec, &BenchOutcome) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<ResultRow>> {
    // Validate every point before running any.
    let mut specs = Vec::new();
    for &v in &vary.values {
        for p in protocols {
            let mut s = base.clone();
            s.protocol = p.clone();
            vary.apply(&mut s, v)?;
            s.validate()?;
            crate::registry::find(p)?;
            specs.push((s, v));
        }
    }
    let mut rows = Vec::new();
    for (s, v) in specs {
        let out = run_bench(&s)?;
        let mut row = out.row.clone();
        row.extra
            .insert(vary.name.replace('-', "_"), serde_json::json!(v));
        each(&s, &out)?;
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_known_names_and_rejects_others() {
        let v = Vary::parse("zipf=0.5,0.9").unwrap();
        assert_eq!(v.values, vec![0.5, 0.9]);
        assert!(Vary::parse("zipf").is_err());
        assert!(Vary::parse("colour=1").is_err());
        assert!(Vary::parse("zipf=a").is_err());
    }
}
