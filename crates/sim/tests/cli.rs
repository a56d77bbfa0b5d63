//! The command line as users run it: `steadfast-sim` is `steadfast sim` stand-alone.

use std::process::Command;

fn sim(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_steadfast-sim"))
        .args(args)
        .output()
        .expect("run steadfast-sim");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bcast_table_and_csv_and_replay() {
    let (ok, table, _) = sim(&[
        "bcast",
        "-P",
        "2048",
        "--faults",
        "2%",
        "--runs",
        "20",
        "--no-progress",
    ]);
    assert!(ok);
    assert!(table.contains("correction latency (L_SCC)"), "{table}");
    assert!(
        table.contains("runs leaving live processes uncolored: 0 of 20"),
        "{table}"
    );

    let (ok, csv, _) = sim(&[
        "bcast", "-P", "2048", "--faults", "2%", "--runs", "5", "--format", "csv",
    ]);
    assert!(ok);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 6, "{csv}");
    assert!(rows[0].starts_with("run,seed,procs,failed"));
    // Replaying a run's seed gives the same row.
    let seed = rows[3].split(',').nth(1).unwrap();
    let (ok, replay, _) = sim(&[
        "bcast", "-P", "2048", "--faults", "2%", "--replay", seed, "--format", "csv",
    ]);
    assert!(ok);
    let replayed = replay.lines().nth(1).unwrap();
    assert_eq!(
        replayed.split_once(',').unwrap().1,
        rows[3].split_once(',').unwrap().1
    );
}

#[test]
fn every_dissemination_and_correction_parses_and_runs() {
    for tree in ["binomial", "kary:4", "lame:3", "optimal", "gossip:20"] {
        for corr in ["checked", "delayed", "optimized:3", "opportunistic"] {
            let (ok, out, err) = sim(&[
                "bcast",
                "-P",
                "300",
                "--tree",
                tree,
                "--correction",
                corr,
                "--runs",
                "2",
            ]);
            assert!(ok, "{tree} {corr}: {err}");
            assert!(out.contains("metric"), "{out}");
        }
    }
    let (ok, _, err) = sim(&[
        "bcast",
        "-P",
        "300",
        "--ack",
        "--correction",
        "none",
        "--runs",
        "2",
    ]);
    assert!(ok, "{err}");
    let (ok, _, err) = sim(&[
        "bcast",
        "-P",
        "300",
        "--numbering",
        "in-order",
        "--faults",
        "ranks:1,7,9",
        "--runs",
        "1",
    ]);
    assert!(ok, "{err}");
    let (ok, _, err) = sim(&[
        "bcast",
        "-P",
        "300",
        "--faults",
        "crash:5%@0..40",
        "--start",
        "30",
        "--runs",
        "2",
    ]);
    assert!(ok, "{err}");
}

#[test]
fn bad_input_is_reported_with_exit_code_2() {
    for args in [
        &["bcast", "--tree", "heap"][..],
        &["bcast", "--faults", "150%"],
        &["bcast", "--faults", "ranks:0"],
        &["bcast", "-P", "8", "--correction", "optimized:4"],
        &["bcast", "--ack"],
        &["bcast", "-o", "0"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_steadfast-sim"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("steadfast sim:"),
            "{args:?}"
        );
    }
}

#[test]
fn paper_writes_tables_for_a_tiny_configuration() {
    let dir = std::env::temp_dir().join(format!("steadfast-paper-test-{}", std::process::id()));
    let (ok, _, err) = sim(&[
        "paper",
        "--out",
        dir.to_str().unwrap(),
        "-P",
        "256",
        "--runs",
        "2",
        "--fig-runs",
        "2",
        "--no-progress",
        "--no-plots",
    ]);
    assert!(ok, "{err}");
    let md = std::fs::read_to_string(dir.join("results.md")).unwrap();
    for section in [
        "Lemma 2",
        "Table 1",
        "opportunistic",
        "Figure 1b",
        "Figures 6 and 7",
    ] {
        assert!(md.contains(section), "missing {section}");
    }
    assert!(dir.join("table1.csv").exists());
    let _ = std::fs::remove_dir_all(dir);
}
