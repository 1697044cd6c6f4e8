//! The network model: latency, jitter, loss, duplication, reordering and
//! partitions. It decides, for each message sent, when (if ever) each copy
//! arrives.

use crate::config::SimConfig;
use rand::rngs::SmallRng;
use rand::Rng;
use tessera_core::ids::{NodeId, Time};

/// Arrival times of the copies of one message (none when lost).
pub fn arrivals(
    cfg: &SimConfig,
    rng: &mut SmallRng,
    sites: (u32, u32),
    ends: (NodeId, NodeId),
    sent: Time,
) -> ([Time; 2], usize) {
    let mut out = [0; 2];
    if ends.0 == ends.1 {
        out[0] = sent;
        return (out, 1);
    }
    if partitioned(cfg, ends, sent) || (cfg.loss > 0.0 && rng.random_bool(cfg.loss)) {
        return (out, 0);
    }
    let copies = if cfg.duplicate > 0.0 && rng.random_bool(cfg.duplicate) {
        2
    } else {
        1
    };
    let base = cfg.latency[sites.0 as usize][sites.1 as usize];
    for slot in out.iter_mut().take(copies) {
        let mut t = sent + base;
        if cfg.jitter > 0 {
            t += rng.random_range(0..=cfg.jitter);
        }
        if cfg.reorder > 0.0 && rng.random_bool(cfg.reorder) {
            t += rng.random_range(0..=cfg.reorder_delay);
        }
        *slot = t;
    }
    (out, copies)
}

fn partitioned(cfg: &SimConfig, (a, b): (NodeId, NodeId), t: Time) -> bool {
    cfg.partitions.iter().any(|p| {
        t >= p.from
            && t < p.until
            && ((p.a.contains(&a) && p.b.contains(&b)) || (p.a.contains(&b) && p.b.contains(&a)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Partition;
    use rand::SeedableRng;

    #[test]
    fn partition_drops_both_directions_only_while_it_lasts() {
        let cfg = SimConfig {
            partitions: vec![Partition {
                from: 100,
                until: 200,
                a: vec![NodeId(0)],
                b: vec![NodeId(1)],
            }],
            ..SimConfig::default()
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let ends = (NodeId(1), NodeId(0));
        assert_eq!(arrivals(&cfg, &mut rng, (0, 0), ends, 150).1, 0);
        assert_eq!(arrivals(&cfg, &mut rng, (0, 0), ends, 250).1, 1);
        assert_eq!(arrivals(&cfg, &mut rng, (0, 0), ends, 50).1, 1);
    }

    #[test]
    fn loss_and_duplication_rates_are_respected() {
        let cfg = SimConfig {
            loss: 0.1,
            duplicate: 0.2,
            ..SimConfig::default()
        };
        let mut rng = SmallRng::seed_from_u64(7);
        let (mut lost, mut dup) = (0, 0);
        for _ in 0..10_000 {
            match arrivals(&cfg, &mut rng, (0, 0), (NodeId(0), NodeId(1)), 0).1 {
                0 => lost += 1,
                2 => dup += 1,
                _ => {}
            }
        }
        assert!((800..1200).contains(&lost), "lost {lost}");
        assert!((1500..2100).contains(&dup), "dup {dup}");
    }
}
