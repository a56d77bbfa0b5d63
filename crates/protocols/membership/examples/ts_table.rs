//! Prints the stabilization-time table of docs/reproduction/membership.md: the paper's model
//! against the latency-model simulation, for fan-out 2 and 4, up to 65,536 processes.
//!
//! `cargo run --release -p steadfast-membership --example ts_table [L_us Ocp_us]`

use std::time::Duration;

use steadfast_membership::model::{
    example_detector, example_failed_node, model_ts, simulate_single_failure, CostModel,
};

fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (l_us, ocp_us) = match args.as_slice() {
        [l, o, ..] => (*l, *o),
        _ => (4.6, 2.0),
    };
    let ns = |us: f64| Duration::from_nanos((us * 1000.0).round() as u64);
    let base = CostModel {
        latency: ns(l_us),
        ocp: ns(ocp_us),
        ..CostModel::default()
    };
    // Contention: every message costs Ocp to handle, and a parent's sends leave 0.5·Ocp apart.
    let busy = CostModel {
        ack_cost: ns(ocp_us),
        send_gap: ns(ocp_us / 2.0),
        ..base
    };
    let sizes = [
        2u32, 3, 4, 5, 6, 7, 8, 15, 16, 21, 22, 31, 32, 63, 64, 85, 86, 127, 128, 255, 256, 341,
        342, 511, 512, 1023, 1024, 1365, 1366, 2047, 2048, 4095, 4096, 5461, 5462, 8191, 8192,
        16383, 16384, 21845, 21846, 32767, 32768, 65535, 65536,
    ];
    println!("L = {l_us} µs, Ocp = {ocp_us} µs; Ts in µs; failed node = root's last child, detector = last id");
    println!();
    println!(
        "| N | H (a=2) | model | sim | sim, contention | H (a=4) | model | sim | sim, contention |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let us = |d: Duration| d.as_nanos() as f64 / 1000.0;
    for n in sizes {
        let mut row = format!("| {n} |");
        for k in [1u8, 2] {
            let f = example_failed_node(n, k);
            let d = example_detector(n, f);
            let s = simulate_single_failure(n, k, f, d, base).expect("valid view");
            let c = simulate_single_failure(n, k, f, d, busy).expect("valid view");
            let m = model_ts(n, k, base.latency, base.ocp);
            row += &format!(
                " {} | {:.1} | {:.1} | {:.1} |",
                s.height_before,
                us(m),
                us(s.ts),
                us(c.ts)
            );
        }
        println!("{row}");
    }
}
