//! Sweeps: one parameter varied over values, every protocol at every point;
//! optionally crossed with a second parameter whose values make separate
//! lines ([`sweep_series`]).

use crate::result::ResultRow;
use crate::run::run_bench;
use crate::spec::{BenchSpec, SpecError, WorkloadSpec};
use tessera_protocols::coco::{CommitMode, Isolation};
use tessera_workloads::tpcc::HomeWarehouse;

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
    "lease-us",
    "backoff-us",
    "oocc-offset-ns",
    "oocc-lease-adapt",
    "fsync-us",
    "server-cpu-ns",
    "local-cpu-ns",
    "byte-cpu-ps",
    "commit",
    "isolation",
    "ablation",
    "home-warehouse",
    "epoch-barrier",
    "per-column",
    "fast-path-by-rtt",
    "prefetch-outputs",
    "paxos-batch",
    "graph-cpu-ns",
];

/// OOCC's ablation steps (§VIII.D, Fig. 11), each adding one technique to
/// the one before: FORD-style OCC, + lease, + write unlock, + delayed
/// write lock (= `oocc`).
pub const ABLATION: &[&str] = &["occ", "+lease", "+write-unlock", "+delay-write-lock"];

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

    /// The flag a value of this parameter sets.
    pub fn flag(&self) -> String {
        format!("--{}", self.name)
    }

    /// The name a numeric value stands for, for parameters that are not
    /// numbers: `commit` counts COCO's commit modes in the order of
    /// [`CommitMode::NAMES`] (0 = 2pc, 1 = 2pc-sync, 2 = epoch), so that a
    /// sweep over them plots on a numeric axis; `isolation` counts
    /// [`Isolation::NAMES`] (0 = serializable, 1 = snapshot); `ablation`
    /// counts [`ABLATION`]; `home-warehouse` counts TPC-C's
    /// [`HomeWarehouse::NAMES`] (0 = fixed, 1 = per-node).
    pub fn label(&self, v: f64) -> Result<&'static str, SpecError> {
        let names = match self.name.as_str() {
            "commit" => CommitMode::NAMES,
            "isolation" => Isolation::NAMES,
            "ablation" => ABLATION,
            "home-warehouse" => HomeWarehouse::NAMES,
            _ => &[],
        };
        let i = v as usize;
        if v.fract() != 0.0 || v < 0.0 || i >= names.len() {
            return Err(SpecError::Invalid {
                flag: "--vary",
                value: format!("{}={v}", self.name),
                allowed: format!(
                    "an index 0..{} into {}",
                    names.len(),
                    if names.is_empty() {
                        "(no names: a numeric parameter)".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            });
        }
        Ok(names[i])
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
        // The bounds of the CLI's flag of the same name.
        let ranged = |v: f64, min: u64, max: u64| -> Result<u64, SpecError> {
            if v >= min as f64 && v.fract() == 0.0 && v <= max as f64 {
                Ok(v as u64)
            } else {
                Err(SpecError::Invalid {
                    flag: "--vary",
                    value: format!("{}={v}", self.name),
                    allowed: format!("a whole number, {min} to {max}"),
                })
            }
        };
        // 0 included, as the CLI's flags of the same name take it.
        let whole = |v: f64, max: u64| ranged(v, 0, max);
        let on_off = |v: f64| -> Result<bool, SpecError> {
            if v == 0.0 || v == 1.0 {
                Ok(v == 1.0)
            } else {
                Err(SpecError::Invalid {
                    flag: "--vary",
                    value: format!("{}={v}", self.name),
                    allowed: "0 (off) or 1 (on)".into(),
                })
            }
        };
        match (self.name.as_str(), &mut spec.workload) {
            ("zipf", WorkloadSpec::Micro(c)) => c.zipf_theta = v,
            ("zipf", WorkloadSpec::Ycsb(c)) => c.zipf_theta = v,
            ("zipf", WorkloadSpec::Counter(c)) => c.zipf_theta = v,
            ("zipf", WorkloadSpec::TaoBench(c)) => c.zipf_theta = v,
            ("write-ratio", WorkloadSpec::Counter(c)) => c.write_ratio = v,
            ("keys", WorkloadSpec::Counter(c)) => c.keys = count(v)? as u64,
            ("clients", _) => spec.clients = count(v)?,
            ("shards", WorkloadSpec::Micro(c)) => c.shards = count(v)?,
            ("shards", WorkloadSpec::Ycsb(c)) => c.partitions = count(v)?,
            ("shards", WorkloadSpec::Tpcc(c)) => c.shards = count(v)?,
            ("shards", WorkloadSpec::Tatp(c)) => c.partitions = count(v)?,
            ("shards", WorkloadSpec::TaoBench(c)) => c.partitions = count(v)?,
            ("subscribers", WorkloadSpec::Tatp(c)) => c.subscribers = count(v)? as u64,
            ("multi-partition", WorkloadSpec::Ycsb(c)) => c.multi_partition = v,
            ("read-ratio", WorkloadSpec::Ycsb(c)) => c.read_ratio = v,
            ("loss", _) => spec.sim.loss = v,
            ("epoch-ms", _) => spec.knobs.epoch_ms = Some(count(v)? as u64),
            ("lease-us", _) => spec.knobs.lease_us = Some(count(v)? as u64),
            ("backoff-us", _) => {
                // 0 retries at once; the CLI's bound (5 ms, the cap).
                if !(0.0..=5_000.0).contains(&v) || v.fract() != 0.0 {
                    return Err(SpecError::Invalid {
                        flag: "--vary",
                        value: format!("{}={v}", self.name),
                        allowed: "a whole number of µs, 0 to 5000".into(),
                    });
                }
                spec.backoff_base = v as u64 * tessera_core::ids::US
            }
            ("oocc-offset-ns", _) => {
                // 0 is the bound's own offset; the run refuses over 1 s.
                if v < 0.0 || v.fract() != 0.0 || v > u64::MAX as f64 {
                    return Err(SpecError::Invalid {
                        flag: "--vary",
                        value: format!("{}={v}", self.name),
                        allowed: "a whole number of ns, 0 or more".into(),
                    });
                }
                spec.knobs.oocc_offset_ns = Some(v as u64)
            }
            ("oocc-lease-adapt", _) => {
                spec.knobs.oocc_lease_adapt = Some(on_off(v)?);
                if v == 0.0 {
                    // A fixed lease takes no adaptation knobs: the
                    // experiment's base sets them for its adapting line.
                    spec.knobs.oocc_lease_min_us = None;
                    spec.knobs.oocc_lease_max_us = None;
                    spec.knobs.oocc_lease_period_us = None;
                }
            }
            ("fsync-us", _) => {
                sim_only(spec.runtime, "fsync-us", "the simulated disk")?;
                spec.sim.fsync = whole(v, 1_000_000)? * tessera_core::ids::US
            }
            ("server-cpu-ns", _) => {
                sim_only(spec.runtime, "server-cpu-ns", "the simulated CPUs")?;
                spec.sim.server_cpu = whole(v, 1_000_000)?
            }
            ("local-cpu-ns", _) => {
                sim_only(spec.runtime, "local-cpu-ns", "the simulated CPUs")?;
                spec.sim.local_cpu = Some(count(v)? as u64)
            }
            ("byte-cpu-ps", _) => {
                sim_only(spec.runtime, "byte-cpu-ps", "the simulated CPUs")?;
                spec.sim.byte_cpu_ps = whole(v, 1_000_000)?
            }
            ("commit", _) => spec.knobs.commit = Some(self.label(v)?.to_string()),
            ("isolation", _) => spec.knobs.isolation = Some(self.label(v)?.to_string()),
            ("epoch-barrier", _) => spec.knobs.epoch_barrier = Some(on_off(v)?),
            ("per-column", _) => spec.knobs.per_column = Some(on_off(v)?),
            ("fast-path-by-rtt", _) => spec.knobs.fast_path_by_rtt = Some(on_off(v)?),
            ("prefetch-outputs", _) => spec.knobs.prefetch_outputs = Some(on_off(v)?),
            ("paxos-batch", _) => spec.knobs.paxos_batch = Some(ranged(v, 1, 65_536)? as usize),
            ("graph-cpu-ns", _) => {
                sim_only(spec.runtime, "graph-cpu-ns", "the simulated CPUs")?;
                spec.knobs.graph_cpu_ns = Some(whole(v, 1_000_000)?)
            }
            ("home-warehouse", WorkloadSpec::Tpcc(c)) => {
                c.home_warehouse = HomeWarehouse::parse(self.label(v)?).unwrap_or_default()
            }
            ("ablation", _) => {
                self.label(v)?;
                let step = v as usize;
                spec.knobs.oocc_lease = Some(step >= 1);
                spec.knobs.oocc_write_unlock = Some(step >= 2);
                spec.knobs.oocc_delayed_lock = Some(step >= 3);
            }
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

/// Refuse `name` off the simulator, whose `what` it sets.
fn sim_only(runtime: crate::spec::RuntimeKind, name: &str, what: &str) -> Result<(), SpecError> {
    if runtime == crate::spec::RuntimeKind::Sim {
        return Ok(());
    }
    Err(SpecError::Invalid {
        flag: "--vary",
        value: name.into(),
        allowed: format!("{name} only with --runtime sim ({what})"),
    })
}

/// Run every protocol at every value; `each` sees every row as its point
/// ends (for progress and incremental output: a long sweep that is stopped
/// keeps the rows it finished). The row carries the parameter
/// (and, for a named one such as `commit`, its name as `commit_name`).
///
/// A protocol that refuses a value of the varied parameter itself (s2pl
/// has no `--isolation snapshot`) sits that point out, with a warning; any
/// other refusal stops the sweep before anything runs.
pub fn sweep(
    base: &BenchSpec,
    protocols: &[String],
    vary: &Vary,
    each: impl FnMut(&BenchSpec, &ResultRow) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<ResultRow>> {
    sweep_series(base, protocols, vary, None, each)
}

/// [`sweep`], once per value of `series` when given: a second parameter
/// (COCO Fig. 15's isolation level) whose values make separate lines. Its
/// rows carry both parameters, and `line`: the protocol and the series
/// value's name (or number), which plots use to tell the lines apart.
pub fn sweep_series(
    base: &BenchSpec,
    protocols: &[String],
    vary: &Vary,
    series: Option<&Vary>,
    mut each: impl FnMut(&BenchSpec, &ResultRow) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<ResultRow>> {
    let lines: Vec<Option<f64>> = match series {
        Some(s) => s.values.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    // Validate every point before running any.
    let mut specs = Vec::new();
    for &line in &lines {
        for &v in &vary.values {
            for p in protocols {
                let mut s = base.clone();
                s.protocol = p.clone();
                let mut params = vec![(vary, v)];
                if let (Some(series), Some(l)) = (series, line) {
                    series.apply(&mut s, l)?;
                    params.push((series, l));
                }
                vary.apply(&mut s, v)?;
                s.validate()?;
                match crate::registry::find(p)?.accepts(&s) {
                    Err(SpecError::Invalid { flag, value, .. })
                        if params.iter().any(|(q, _)| flag == q.flag()) =>
                    {
                        tracing::warn!("{p} refuses {flag} {value}: point skipped");
                        continue;
                    }
                    r => r?,
                }
                specs.push((s, params));
            }
        }
    }
    let mut rows = Vec::new();
    for (s, params) in specs {
        let out = run_bench(&s)?;
        let mut row = out.row.clone();
        for &(q, v) in &params {
            let key = q.name.replace('-', "_");
            if let Ok(name) = q.label(v) {
                row.extra
                    .insert(format!("{key}_name"), serde_json::json!(name));
            }
            row.extra.insert(key, serde_json::json!(v));
        }
        if let Some(&(q, v)) = params.get(1) {
            let name = q.label(v).map_or(v.to_string(), str::to_string);
            row.extra.insert(
                "line".into(),
                serde_json::json!(format!("{} {name}", s.protocol)),
            );
        }
        each(&s, &row)?;
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short simulated YCSB run for the sweep tests.
    fn short_sim_base() -> BenchSpec {
        let mut base = BenchSpec::new(
            crate::RuntimeKind::Sim,
            "",
            WorkloadSpec::Ycsb(tessera_workloads::YcsbConfig {
                partitions: 2,
                keys_per_partition: 100,
                ..Default::default()
            }),
        );
        base.clients = 2;
        base.duration = 20 * tessera_core::ids::MS;
        base.warmup = 2 * tessera_core::ids::MS;
        base.cooldown = 2 * tessera_core::ids::MS;
        base
    }

    #[test]
    fn parse_accepts_known_names_and_rejects_others() {
        let v = Vary::parse("zipf=0.5,0.9").unwrap();
        assert_eq!(v.values, vec![0.5, 0.9]);
        assert!(Vary::parse("zipf").is_err());
        assert!(Vary::parse("colour=1").is_err());
        assert!(Vary::parse("zipf=a").is_err());
    }

    #[test]
    fn ablation_steps_add_one_technique_each() {
        let v = Vary::parse("ablation=0,1,2,3").unwrap();
        let mut s = BenchSpec::new(
            crate::spec::RuntimeKind::Sim,
            "oocc",
            WorkloadSpec::Ycsb(tessera_workloads::YcsbConfig::default()),
        );
        let mut seen = Vec::new();
        for &x in &v.values {
            v.apply(&mut s, x).unwrap();
            let k = &s.knobs;
            seen.push((k.oocc_lease, k.oocc_write_unlock, k.oocc_delayed_lock));
        }
        let (t, f) = (Some(true), Some(false));
        assert_eq!(seen, vec![(f, f, f), (t, f, f), (t, t, f), (t, t, t)]);
        assert_eq!(v.label(3.0).unwrap(), "+delay-write-lock");
        assert!(v.apply(&mut s, 4.0).is_err());
        assert!(v.apply(&mut s, 1.5).is_err());
    }

    #[test]
    fn backoff_takes_whole_microseconds_from_zero_to_the_cap() {
        let v = Vary::parse("backoff-us=0,20").unwrap();
        let mut s = BenchSpec::new(
            crate::RuntimeKind::Sim,
            "oocc",
            WorkloadSpec::Ycsb(Default::default()),
        );
        assert_eq!(s.backoff_base, 20 * tessera_core::ids::US);
        v.apply(&mut s, 0.0).unwrap();
        assert_eq!(s.backoff_base, 0);
        v.apply(&mut s, 5000.0).unwrap();
        assert_eq!(s.backoff_base, 5 * tessera_core::ids::MS);
        for bad in [-1.0, 0.5, 5001.0] {
            assert!(v.apply(&mut s, bad).is_err(), "{bad}");
        }
    }

    /// The simulated CPU's and disk's costs take 0 (free), as their CLI
    /// flags do, up to the flags' bounds.
    #[test]
    fn cpu_and_fsync_costs_take_zero_and_whole_numbers() {
        let mut s = BenchSpec::new(
            crate::RuntimeKind::Sim,
            "rococo",
            WorkloadSpec::Ycsb(Default::default()),
        );
        let bytes = Vary::parse("byte-cpu-ps=0,250").unwrap();
        bytes.apply(&mut s, 250.0).unwrap();
        assert_eq!(s.sim.byte_cpu_ps, 250);
        bytes.apply(&mut s, 0.0).unwrap();
        assert_eq!(s.sim.byte_cpu_ps, 0);
        let server = Vary::parse("server-cpu-ns=5000,10000").unwrap();
        server.apply(&mut s, 10_000.0).unwrap();
        assert_eq!(s.sim.server_cpu, 10_000);
        server.apply(&mut s, 0.0).unwrap();
        assert_eq!(s.sim.server_cpu, 0);
        let graph = Vary::parse("graph-cpu-ns=0,100").unwrap();
        graph.apply(&mut s, 100.0).unwrap();
        assert_eq!(s.knobs.graph_cpu_ns, Some(100));
        assert!(graph.apply(&mut s, 0.5).is_err());
        assert!(server.apply(&mut s, 2_000_000.0).is_err());
        let fsync = Vary::parse("fsync-us=0,100").unwrap();
        fsync.apply(&mut s, 0.0).unwrap();
        assert_eq!(s.sim.fsync, 0);
        for bad in [-1.0, 0.5, 2_000_000.0] {
            assert!(bytes.apply(&mut s, bad).is_err(), "{bad}");
            assert!(fsync.apply(&mut s, bad).is_err(), "{bad}");
        }
    }

    /// `paxos-batch` takes the flag's range, 1 to 65536 commands a slot.
    #[test]
    fn paxos_batch_takes_commands_per_slot() {
        let v = Vary::parse("paxos-batch=1,256").unwrap();
        let mut s = BenchSpec::new(
            crate::RuntimeKind::Sim,
            "2pl-paxos",
            WorkloadSpec::Ycsb(Default::default()),
        );
        v.apply(&mut s, 1.0).unwrap();
        assert_eq!(s.knobs.paxos_batch, Some(1));
        v.apply(&mut s, 65_536.0).unwrap();
        assert_eq!(s.knobs.paxos_batch, Some(65_536));
        for bad in [0.0, 0.5, 65_537.0] {
            assert!(v.apply(&mut s, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commit_modes_are_indices() {
        let v = Vary::parse("commit=0,1,2").unwrap();
        assert_eq!(v.label(1.0).unwrap(), "2pc-sync");
        assert!(v.label(3.0).is_err());
        assert!(v.label(0.5).is_err());
        let mut s = BenchSpec::new(
            crate::RuntimeKind::Sim,
            "pt-occ",
            WorkloadSpec::Ycsb(Default::default()),
        );
        v.apply(&mut s, 2.0).unwrap();
        assert_eq!(s.knobs.commit.as_deref(), Some("epoch"));
        assert!(Vary::parse("zipf=1").unwrap().label(0.0).is_err());
    }

    /// A series crosses the varied parameter: every protocol at every point
    /// of each line, rows named by protocol and series value, and a
    /// protocol that refuses a series value (s2pl has no snapshot
    /// transactions) sits that line out.
    #[test]
    fn a_series_makes_one_line_per_protocol_and_value() {
        let base = short_sim_base();
        let vary = Vary::parse("zipf=0,0.9").unwrap();
        let series = Vary::parse("isolation=0,1").unwrap();
        let protocols = ["pt-occ".to_string(), "s2pl".to_string()];
        let rows = sweep_series(&base, &protocols, &vary, Some(&series), |_, _| Ok(())).unwrap();
        let lines: Vec<(String, f64)> = rows
            .iter()
            .map(|r| {
                (
                    r.extra["line"].as_str().unwrap().to_string(),
                    r.extra["zipf"].as_f64().unwrap(),
                )
            })
            .collect();
        let want = [
            ("pt-occ serializable", 0.0),
            ("s2pl serializable", 0.0),
            ("pt-occ serializable", 0.9),
            ("s2pl serializable", 0.9),
            ("pt-occ snapshot", 0.0),
            ("pt-occ snapshot", 0.9),
        ];
        let want: Vec<(String, f64)> = want.iter().map(|(l, z)| (l.to_string(), *z)).collect();
        assert_eq!(lines, want);
        assert_eq!(rows[4].extra["isolation_name"], "snapshot");
    }

    #[test]
    fn a_protocol_sits_out_the_values_of_the_varied_flag_it_refuses() {
        let mut base = short_sim_base();
        let vary = Vary::parse("isolation=1").unwrap();
        let rows = sweep(&base, &["s2pl".to_string()], &vary, |_, _| Ok(())).unwrap();
        assert!(rows.is_empty());
        // A refusal of another flag still stops the sweep.
        base.knobs.switch_cache = Some(10);
        assert!(sweep(&base, &["s2pl".to_string()], &vary, |_, _| Ok(())).is_err());
    }
}
