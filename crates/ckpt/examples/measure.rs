//! Measures checkpoint cost against heap size: how long the caller is stopped (until the
//! fork returns) and how long the child takes to write and sync the image.
//!
//!   setarch -R cargo run --release -p steadfast-ckpt --example measure -- DIR 1 64 512
//!
//! (sizes in MiB of a touched heap buffer; the image is written to DIR and removed).

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, sizes)) = args.split_first() else {
        eprintln!("usage: measure DIR MIB...");
        std::process::exit(2);
    };
    println!("heap_mib  fork_ms  write_ms  image_mib  regions");
    for s in sizes {
        let mib: usize = s.parse().expect("size in MiB");
        let mut buf = vec![0u8; mib << 20];
        for (i, b) in buf.iter_mut().enumerate().step_by(512) {
            *b = i as u8; // touch every page so it is resident and saved as data
        }
        let path = std::path::Path::new(dir).join(format!("measure-{mib}.img"));
        let t0 = Instant::now();
        match steadfast_ckpt::checkpoint(&path, &Default::default()) {
            Ok(steadfast_ckpt::Outcome::Checkpointed(p)) => {
                let fork = t0.elapsed();
                let stats = p.wait().expect("image written");
                let total = t0.elapsed();
                println!(
                    "{mib:8}  {:7.2}  {:8.1}  {:9.1}  {:7}",
                    fork.as_secs_f64() * 1e3,
                    (total - fork).as_secs_f64() * 1e3,
                    stats.bytes as f64 / (1u64 << 20) as f64,
                    stats.regions
                );
            }
            Ok(steadfast_ckpt::Outcome::Restored) => unreachable!("this example is never restored"),
            Err(e) => {
                eprintln!("checkpoint: {e}");
                std::process::exit(1);
            }
        }
        let _ = std::fs::remove_file(&path);
        std::hint::black_box(&buf);
    }
}
