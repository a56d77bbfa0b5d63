//! Definition 1 of the paper: a tree is interleaved iff for every subtree T_s, any two nodes
//! adjacent on the ring of T_s's nodes (ordered by rank, first and last connected) either
//! descend from each other or have root(T_s) as their only common ancestor inside T_s.

use proptest::prelude::*;
use steadfast_coll::{Numbering, Topology, TreeKind};

/// Returns the first violating (subtree root, a, b), if any.
fn definition_1_violation(t: &Topology) -> Option<(u32, u32, u32)> {
    let p = t.procs() as usize;
    let mut parent = vec![u32::MAX; p];
    let mut depth = vec![0u32; p];
    // Breadth-first from the root fills parent and depth without recursion.
    let mut queue = std::collections::VecDeque::from([0u32]);
    while let Some(v) = queue.pop_front() {
        for c in t.children(v) {
            parent[c as usize] = v;
            depth[c as usize] = depth[v as usize] + 1;
            queue.push_back(c);
        }
    }
    let lca = |mut a: u32, mut b: u32| {
        while depth[a as usize] > depth[b as usize] {
            a = parent[a as usize];
        }
        while depth[b as usize] > depth[a as usize] {
            b = parent[b as usize];
        }
        while a != b {
            a = parent[a as usize];
            b = parent[b as usize];
        }
        a
    };
    for v in 0..p as u32 {
        let mut nodes = vec![v];
        let mut stack: Vec<u32> = t.children(v).collect();
        while let Some(c) = stack.pop() {
            nodes.push(c);
            stack.extend(t.children(c));
        }
        if nodes.len() < 2 {
            continue;
        }
        nodes.sort_unstable();
        for i in 0..nodes.len() {
            let (a, b) = (nodes[i], nodes[(i + 1) % nodes.len()]);
            let m = lca(a, b);
            if m != a && m != b && m != v {
                return Some((v, a, b));
            }
        }
    }
    None
}

fn kinds() -> impl Strategy<Value = TreeKind> {
    prop_oneof![
        (2u32..6).prop_map(|k| TreeKind::KAry { k }),
        Just(TreeKind::Binomial),
        (1u32..5).prop_map(|k| TreeKind::Lame { k }),
        (0u32..3, 1u32..4).prop_map(|(m, o)| TreeKind::Optimal { l: m * o, o }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Interleaved trees satisfy Definition 1 for arbitrary P, powers of two or not.
    #[test]
    fn interleaved_trees_satisfy_definition_1(kind in kinds(), p in 1u32..1500) {
        let t = Topology::new(kind, Numbering::Interleaved, p).unwrap();
        prop_assert_eq!(definition_1_violation(&t), None, "{:?} P={}", kind, p);
    }
}

#[test]
fn interleaved_definition_1_exhaustive_small() {
    for p in 1..=130u32 {
        for kind in [
            TreeKind::KAry { k: 1 },
            TreeKind::KAry { k: 2 },
            TreeKind::KAry { k: 3 },
            TreeKind::Binomial,
            TreeKind::Lame { k: 2 },
            TreeKind::Lame { k: 4 },
            TreeKind::Optimal { l: 2, o: 1 },
            TreeKind::Optimal { l: 4, o: 2 },
            TreeKind::Optimal { l: 0, o: 3 },
        ] {
            let t = Topology::new(kind, Numbering::Interleaved, p).unwrap();
            assert_eq!(definition_1_violation(&t), None, "{kind:?} P={p}");
        }
    }
}

/// The negative space: in-order numbering is not interleaved once subtrees have depth two.
#[test]
fn in_order_trees_violate_definition_1() {
    for kind in [
        TreeKind::KAry { k: 2 },
        TreeKind::Binomial,
        TreeKind::Lame { k: 2 },
    ] {
        let t = Topology::new(kind, Numbering::InOrder, 64).unwrap();
        assert!(definition_1_violation(&t).is_some(), "{kind:?}");
    }
    let t = Topology::new(TreeKind::KAry { k: 2 }, Numbering::InOrder, 15).unwrap();
    // 3 and 4 are both children of 2, which is not the root.
    assert_eq!(definition_1_violation(&t), Some((0, 3, 4)));
}

/// Documented limitation: when o does not divide L, processes colored at times that differ
/// modulo o send in different instants, and numbering them in coloring order (which keeps the
/// tree latency-optimal) is not interleaved. With o | L the optimal tree is the Lamé tree of
/// order 2 + L/o in units of o, and interleaved (covered above).
#[test]
fn optimal_tree_with_o_not_dividing_l_is_not_interleaved() {
    let t = Topology::new(TreeKind::Optimal { l: 1, o: 2 }, Numbering::Interleaved, 15).unwrap();
    assert!(definition_1_violation(&t).is_some());
}
