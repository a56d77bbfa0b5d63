//! Stabilization time Ts: the paper's model and a deterministic latency-model simulation.
//!
//! The paper (Section 4) models the time from the root's receipt of a failure report to
//! its receipt of the last FAILURE_ACK as `Ts = 2·L·(H−1) + Ocp·H`: FAILED_NODE goes down
//! H−1 levels and FAILURE_ACK comes back up, each hop costing the latency L, and every
//! level recalculates its tree once (Ocp). [`simulate_single_failure`] plays that exchange
//! message by message over the real tree of the new view (the same [`View`] code the state
//! machine uses), with a per-hop latency, a per-message processing cost and optional
//! LogP-like contention, so measurements can be set against both.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use crate::id::{Member, NodeId, ViewId};
use crate::tree::tree_height;
use crate::view::{View, ViewError};

/// The paper's model: `Ts = 2·L·(H−1) + Ocp·H`, H the start-up tree height for `n`.
pub fn model_ts(n: u32, fanout_log2: u8, latency: Duration, ocp: Duration) -> Duration {
    let h = tree_height(n, fanout_log2);
    latency * 2 * h.saturating_sub(1) + ocp * h
}

/// Costs of the latency-model simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CostModel {
    /// One-way latency L of every message.
    pub latency: Duration,
    /// Processing a failure report or a view change (the tree recalculation, Ocp).
    pub ocp: Duration,
    /// Processing any other message (an ack); 0 in the paper's model.
    pub ack_cost: Duration,
    /// Spacing between consecutive sends of one handler (a parent's sends to its children
    /// leave one after another); 0 in the paper's model.
    pub send_gap: Duration,
}

/// One simulated single-failure stabilization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsSample {
    /// Processes before the failure.
    pub n: u32,
    /// Height of the start-up tree (the model's H).
    pub height_before: u32,
    /// Height of the tree after removing the failed node.
    pub height_after: u32,
    /// Root's receipt of the report to its receipt of the last ack.
    pub ts: Duration,
    /// Sequential hops on the critical path: 2·(height_after − 1).
    pub depth: u32,
    /// Messages exchanged (report excluded).
    pub messages: u64,
}

/// The node the paper's example removes: the root's last child (node 4 with four
/// children), or the last node of very small trees.
pub fn example_failed_node(n: u32, fanout_log2: u8) -> NodeId {
    (1u32 << fanout_log2).min(n.saturating_sub(1))
}

/// The detector of the paper's example: a leaf (the highest id), not the failed node.
pub fn example_detector(n: u32, failed: NodeId) -> NodeId {
    let last = n.saturating_sub(1);
    if last != failed {
        last
    } else {
        last.saturating_sub(1)
    }
}

/// Message depth of stabilization after removing `failed` from the start-up view of `n`:
/// FAILED_NODE down and FAILURE_ACK up the new tree, 2·(H'−1) hops.
pub fn stabilization_depth(n: u32, fanout_log2: u8, failed: NodeId) -> Result<u32, ViewError> {
    let w = View::initial(n, fanout_log2)?.apply(next_id(), &[Member::new(failed, 0)], &[])?;
    Ok(2 * (w.height() - 1))
}

fn next_id() -> ViewId {
    ViewId {
        epoch: 1,
        coordinator: 0,
        coordinator_incarnation: 0,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    DetAck { to: NodeId },
    Change { to: NodeId, from: NodeId },
    Ack { to: NodeId },
}

/// Plays one single-failure stabilization in the start-up view of `n`: `detector` reports
/// `failed` to the root (time 0 is the root's receipt), the root answers FAILURE_DET_ACK,
/// then FAILED_NODE goes down and FAILURE_ACK up the new tree. Each process handles one
/// message at a time, in arrival order, exactly as the state machine under the simulator.
pub fn simulate_single_failure(
    n: u32,
    fanout_log2: u8,
    failed: NodeId,
    detector: NodeId,
    cost: CostModel,
) -> Result<TsSample, ViewError> {
    let v = View::initial(n, fanout_log2)?;
    let w = v.apply(next_id(), &[Member::new(failed, 0)], &[])?;
    let root = w.root();
    let mut busy = vec![Duration::ZERO; n as usize];
    let mut pending = vec![0u32; n as usize];
    let mut parent = vec![0 as NodeId; n as usize];
    let mut queue: BinaryHeap<Reverse<(Duration, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut messages = 0u64;
    let mut send = |queue: &mut BinaryHeap<_>, at: Duration, ev: Ev| {
        seq += 1;
        messages += 1;
        queue.push(Reverse((at + cost.latency, seq, ev)));
    };
    // The root handles the report: recalculation, FAILURE_DET_ACK, then its children.
    let end = cost.ocp;
    busy[root as usize] = end;
    let mut outputs = Vec::new();
    if detector != root {
        outputs.push(Ev::DetAck { to: detector });
    }
    let kids = w.children(root);
    pending[root as usize] = kids.len() as u32;
    outputs.extend(kids.iter().map(|&c| Ev::Change { to: c, from: root }));
    for (i, ev) in outputs.into_iter().enumerate() {
        send(&mut queue, end + cost.send_gap * i as u32, ev);
    }
    let mut ts = if pending[root as usize] == 0 {
        Some(end)
    } else {
        None
    };
    while let Some(Reverse((at, _, ev))) = queue.pop() {
        let to = match ev {
            Ev::DetAck { to } | Ev::Change { to, .. } | Ev::Ack { to } => to,
        };
        let start = at.max(busy[to as usize]);
        let c = if matches!(ev, Ev::Change { .. }) {
            cost.ocp
        } else {
            cost.ack_cost
        };
        let end = start + c;
        busy[to as usize] = end;
        match ev {
            Ev::DetAck { .. } => {}
            Ev::Change { from, .. } => {
                parent[to as usize] = from;
                let kids = w.children(to);
                if kids.is_empty() {
                    send(&mut queue, end, Ev::Ack { to: from });
                } else {
                    pending[to as usize] = kids.len() as u32;
                    for (i, &k) in kids.iter().enumerate() {
                        send(
                            &mut queue,
                            end + cost.send_gap * i as u32,
                            Ev::Change { to: k, from: to },
                        );
                    }
                }
            }
            Ev::Ack { .. } => {
                pending[to as usize] -= 1;
                if pending[to as usize] == 0 {
                    if to == root {
                        ts = Some(end);
                    } else {
                        send(
                            &mut queue,
                            end,
                            Ev::Ack {
                                to: parent[to as usize],
                            },
                        );
                    }
                }
            }
        }
    }
    let height_after = w.height();
    Ok(TsSample {
        n,
        height_before: tree_height(n, fanout_log2),
        height_after,
        ts: ts.unwrap_or_default(),
        depth: 2 * (height_after - 1),
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: f64) -> Duration {
        Duration::from_nanos((x * 1000.0) as u64)
    }

    const BGL: CostModel = CostModel {
        latency: Duration::from_nanos(4600),
        ocp: Duration::from_nanos(2000),
        ack_cost: Duration::ZERO,
        send_gap: Duration::ZERO,
    };

    #[test]
    fn model_formula() {
        // Four children, 21 processes: H = 3, Ts = 2·L·2 + 3·Ocp.
        assert_eq!(model_ts(21, 2, us(4.6), us(2.0)), us(4.0 * 4.6 + 6.0));
        assert_eq!(model_ts(1, 2, us(4.6), us(2.0)), us(2.0));
    }

    /// Under the paper's assumptions the simulation reproduces the formula exactly
    /// whenever removing the node leaves the height unchanged.
    #[test]
    fn simulation_matches_model_when_height_is_kept() {
        let mut checked = 0;
        for k in 1..=3u8 {
            for n in 3..600u32 {
                let f = example_failed_node(n, k);
                let s = simulate_single_failure(n, k, f, example_detector(n, f), BGL).unwrap();
                assert_eq!(s.depth, stabilization_depth(n, k, f).unwrap());
                let h = s.height_after;
                assert_eq!(s.ts, BGL.latency * 2 * (h - 1) + BGL.ocp * h, "n={n} k={k}");
                if h == s.height_before {
                    assert_eq!(s.ts, model_ts(n, k, BGL.latency, BGL.ocp));
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000);
    }

    #[test]
    fn logarithmic_growth() {
        for k in [1u8, 2] {
            let t = |n| {
                let f = example_failed_node(n, k);
                simulate_single_failure(n, k, f, example_detector(n, f), BGL)
                    .unwrap()
                    .ts
            };
            let (small, large) = (t(64), t(65_536));
            // 1024× more processes, about (log 65536 / log 64)× the time.
            assert!(large < small * 3, "k={k}: {small:?} -> {large:?}");
            assert!(large > small);
        }
    }
}
