//! Where servers and clients sit, and the round trips between sites.
//!
//! A replicated shard puts replica `r` on site `r % sites`, so with three
//! replicas over three sites every shard has one replica per site and every
//! leader starts on site 0 (Janus §6: "each server replica resides in a
//! different data center"; in its geo runs "all leaders of the underlying
//! MultiPaxos happen to be co-located in the same data center as the
//! clients"). Client hosts sit with the leaders or spread over the sites
//! ([`ClientSites`]). `--primary-sites spread` ([`PrimarySites`]) moves
//! shard `s`'s primary to site `s % sites` instead, its backups to the
//! other sites (COCO §7.5's wide-area deployment).
//!
//! Presets: `one` (one data center: the simulator's own latency),
//! `three-regions` (Janus Table 2: Oregon–Ireland 140 ms, Oregon–Seoul
//! 122 ms, Ireland–Seoul 243 ms round trips; ~1 ms inside a site) and
//! `coco-wan` (COCO §7.5: North Virginia–Ohio 11.3 ms, North
//! Virginia–North California 60.9 ms, Ohio–North California 50.0 ms). A FILE
//! holds a square matrix of round-trip times in milliseconds, one row per
//! line (the diagonal is the round trip inside a site); `#` starts a
//! comment.

use crate::spec::SpecError;
use tessera_core::ids::{Time, MS};

/// Named sites and the round trip between each pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Sites {
    /// What the user asked for (`three-regions`, a path), for messages.
    pub name: String,
    pub names: Vec<String>,
    /// Round-trip time between sites `a` and `b`, `rtt[a][b]`, in ns.
    pub rtt: Vec<Vec<Time>>,
}

/// Where client hosts sit when there are several sites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientSites {
    /// Host `h` on site `h % sites` (Janus' and TAPIR's clients, §6).
    Spread,
    /// Every host on site 0, with the initial leaders (the layered
    /// baselines' clients in Janus §6).
    Leaders,
}

impl ClientSites {
    pub const NAMED: &'static [(&'static str, Self)] = &[
        ("spread", ClientSites::Spread),
        ("leaders", ClientSites::Leaders),
    ];

    pub fn parse(s: &str) -> Result<Self, SpecError> {
        by_name("--client-sites", s, Self::NAMED)
    }
}

/// The value named `s` among `named`, or an error for `flag` listing them.
fn by_name<T: Copy>(flag: &'static str, s: &str, named: &[(&str, T)]) -> Result<T, SpecError> {
    named
        .iter()
        .find(|(n, _)| *n == s)
        .map(|&(_, v)| v)
        .ok_or_else(|| SpecError::Invalid {
            flag,
            value: s.to_string(),
            allowed: named.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        })
}

/// Where each shard's primary (replica 0, the initial leader) sits when
/// there are several sites.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrimarySites {
    /// Replica `r` of every shard on site `r % sites`: every primary on
    /// site 0 (Janus §6's geo runs, whose leaders share a data center).
    #[default]
    First,
    /// Shard `s`'s replica `r` on site `(s + r) % sites`: the primaries
    /// spread over the sites, each shard's backups on the others (COCO
    /// §7.5, Fig. 12: "the primary partition is randomly chosen from 3
    /// nodes", one node per region). See
    /// [`tessera_core::topology::Topology::spread_primaries`].
    Spread,
}

impl PrimarySites {
    pub const NAMED: &'static [(&'static str, Self)] = &[
        ("first", PrimarySites::First),
        ("spread", PrimarySites::Spread),
    ];

    pub fn parse(s: &str) -> Result<Self, SpecError> {
        by_name("--primary-sites", s, Self::NAMED)
    }
}

impl Sites {
    /// Janus Table 2's three regions, ~1 ms inside each.
    pub fn three_regions() -> Self {
        let (or_ie, or_kr, ie_kr, local) = (140 * MS, 122 * MS, 243 * MS, MS);
        Sites {
            name: "three-regions".into(),
            names: vec!["oregon".into(), "ireland".into(), "seoul".into()],
            rtt: vec![
                vec![local, or_ie, or_kr],
                vec![or_ie, local, ie_kr],
                vec![or_kr, ie_kr, local],
            ],
        }
    }

    /// COCO §7.5's three EC2 regions: North Virginia–Ohio 11.3 ms,
    /// North Virginia–North California 60.9 ms, Ohio–North California
    /// 50.0 ms round trips; ~1 ms inside each.
    pub fn coco_wan() -> Self {
        let ms = |x: f64| (x * MS as f64) as Time;
        let (va_oh, va_ca, oh_ca, local) = (ms(11.3), ms(60.9), ms(50.0), MS);
        Sites {
            name: "coco-wan".into(),
            names: vec!["virginia".into(), "ohio".into(), "california".into()],
            rtt: vec![
                vec![local, va_oh, va_ca],
                vec![va_oh, local, oh_ca],
                vec![va_ca, oh_ca, local],
            ],
        }
    }

    /// `one` (no sites: `None`), `three-regions`, `coco-wan`, or a file of
    /// round trips.
    pub fn parse(s: &str) -> Result<Option<Self>, SpecError> {
        match s {
            "one" => Ok(None),
            "three-regions" => Ok(Some(Sites::three_regions())),
            "coco-wan" => Ok(Some(Sites::coco_wan())),
            path => {
                let text = std::fs::read_to_string(path).map_err(|e| SpecError::Invalid {
                    flag: "--sites",
                    value: path.to_string(),
                    allowed: format!(
                        "one, three-regions, coco-wan, or a readable matrix file ({e})"
                    ),
                })?;
                Sites::from_matrix(path, &text).map(Some)
            }
        }
    }

    /// Parse a matrix of round trips in milliseconds (see the module docs).
    pub fn from_matrix(name: &str, text: &str) -> Result<Self, SpecError> {
        let bad = |why: String| SpecError::Invalid {
            flag: "--sites",
            value: name.to_string(),
            allowed: format!(
                "one, three-regions, coco-wan, or a file of round-trip times in ms, \
                 a square matrix one row per line ({why})"
            ),
        };
        let mut rtt = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let row = line
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|f| !f.is_empty())
                .map(|f| match f.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok((v * MS as f64) as Time),
                    _ => Err(bad(format!(
                        "line {}: '{f}' is not a round trip in ms",
                        i + 1
                    ))),
                })
                .collect::<Result<Vec<Time>, _>>()?;
            rtt.push(row);
        }
        let n = rtt.len();
        if n == 0 {
            return Err(bad("no rows".into()));
        }
        if let Some(r) = rtt.iter().position(|r| r.len() != n) {
            return Err(bad(format!(
                "row {} has {} entries for {n} sites",
                r + 1,
                rtt[r].len()
            )));
        }
        Ok(Sites {
            name: name.to_string(),
            names: (0..n).map(|i| format!("site{i}")).collect(),
            rtt,
        })
    }

    pub fn len(&self) -> usize {
        self.rtt.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rtt.is_empty()
    }

    /// The simulator's one-way latency matrix (half of each round trip).
    pub fn one_way(&self) -> Vec<Vec<Time>> {
        self.rtt
            .iter()
            .map(|r| r.iter().map(|t| t / 2).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_files() {
        assert_eq!(Sites::parse("one").unwrap(), None);
        let geo = Sites::parse("three-regions").unwrap().unwrap();
        assert_eq!(geo.len(), 3);
        assert_eq!(geo.one_way()[1][2], 243 * MS / 2);
        let coco = Sites::parse("coco-wan").unwrap().unwrap();
        assert_eq!(coco.rtt[0][1], 11_300 * MS / 1_000);
        assert_eq!(coco.rtt[2][0], 60_900 * MS / 1_000);
        assert_eq!(coco.rtt[1][2], 50 * MS);
        let m = Sites::from_matrix("f", "# rtt ms\n1 100\n100 1\n").unwrap();
        assert_eq!(m.rtt, vec![vec![MS, 100 * MS], vec![100 * MS, MS]]);
        for bad in ["", "1 2\n3", "1 x\n2 3", "1 -2\n2 1"] {
            let e = Sites::from_matrix("f", bad).unwrap_err().to_string();
            assert!(e.contains("--sites"), "{e}");
        }
        assert_eq!(PrimarySites::parse("spread").unwrap(), PrimarySites::Spread);
        assert_eq!(PrimarySites::default(), PrimarySites::First);
        let e = PrimarySites::parse("random").unwrap_err().to_string();
        assert!(
            e.contains("--primary-sites") && e.contains("first, spread"),
            "{e}"
        );
        let e = ClientSites::parse("near").unwrap_err().to_string();
        assert!(
            e.contains("--client-sites") && e.contains("spread, leaders"),
            "{e}"
        );
        assert!(Sites::parse("/nonexistent/sites.txt")
            .unwrap_err()
            .to_string()
            .contains("--sites"));
    }
}
