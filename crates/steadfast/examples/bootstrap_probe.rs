//! A rank program for the launcher's tests: exercises the bootstrap client.
//!
//! Usage (under `steadfast run`): `bootstrap_probe MODE [ARG]` where MODE is one of
//! `kvs [ROUNDS]`, `fences [ROUNDS]`, `abort CODE`, `badkey`, `garbage`, `runthrough VICTIM`,
//! `nofinalize`, `singleton`. Prints `ok ...` lines the tests check, and exits non-zero on any
//! unexpected result.

use std::time::{Duration, Instant};
use steadfast_runtime::{Bootstrap, BootstrapError, ExitStatus, LauncherEvent};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("kvs");
    let arg = args.get(1).map(String::as_str);
    let result = match mode {
        "kvs" => kvs(arg.and_then(|a| a.parse().ok()).unwrap_or(1)),
        "abort" => abort(arg.and_then(|a| a.parse().ok()).unwrap_or(1)),
        "badkey" => badkey(),
        "duplicate" => duplicate(),
        "runthrough" => runthrough(arg.and_then(|a| a.parse().ok()).unwrap_or(1)),
        "nofinalize" => connect().map(|_| ()),
        "garbage" => garbage(),
        "fences" => fences(arg.and_then(|a| a.parse().ok()).unwrap_or(100)),
        "singleton" => match Bootstrap::from_env() {
            Ok(None) => {
                println!("ok singleton");
                Ok(())
            }
            other => Err(format!("expected singleton, got {other:?}")),
        },
        other => Err(format!("unknown mode {other}")),
    };
    if let Err(e) = result {
        eprintln!("probe failed: {e}");
        std::process::exit(99);
    }
}

fn connect() -> Result<Bootstrap, String> {
    match Bootstrap::from_env() {
        Ok(Some(bs)) => Ok(bs),
        Ok(None) => Err("not started by a launcher".into()),
        Err(e) => Err(format!("bootstrap failed: {e}")),
    }
}

fn e(err: BootstrapError) -> String {
    err.to_string()
}

/// Every rank puts a value, fences, and reads everyone's; then a get that blocks until
/// the next rank puts (no fence in between); repeated `rounds` times.
fn kvs(rounds: u32) -> Result<(), String> {
    let mut bs = connect()?;
    let (rank, size) = (bs.rank(), bs.size());
    if !bs.jobdir().is_dir() {
        return Err("job directory missing".into());
    }
    let t0 = Instant::now();
    for round in 0..rounds {
        bs.put(
            &format!("card-{round}-{rank}"),
            &format!("addr-{round}-{rank}"),
        )
        .map_err(e)?;
        bs.fence().map_err(e)?;
        for peer in 0..size {
            let v = bs.get(&format!("card-{round}-{peer}")).map_err(e)?;
            if v != format!("addr-{round}-{peer}") {
                return Err(format!("rank {rank}: wrong value {v:?} for peer {peer}"));
            }
        }
    }
    let fence_time = t0.elapsed();
    // Blocking get: ask for the next rank's late key before it is necessarily put.
    let next = (rank + 1) % size;
    bs.put(&format!("late-{rank}"), "x").map_err(e)?;
    let v = bs.get(&format!("late-{next}")).map_err(e)?;
    if v != "x" {
        return Err(format!("late value {v:?}"));
    }
    bs.fence().map_err(e)?;
    bs.finalize().map_err(e)?;
    if bs.put("after", "finalize").is_ok() {
        return Err("put after finalize succeeded".into());
    }
    println!(
        "ok kvs rank {rank} of {size} rounds {rounds} in {:.3} ms",
        fence_time.as_secs_f64() * 1e3
    );
    Ok(())
}

/// Rank 1 aborts with `code`; everyone else blocks in a fence that never completes.
fn abort(code: i32) -> Result<(), String> {
    let mut bs = connect()?;
    if bs.rank() == 1 {
        std::thread::sleep(Duration::from_millis(100));
        bs.abort(code, "probe gives up");
        std::process::exit(if code == 0 { 1 } else { code });
    }
    bs.fence().map_err(e)?;
    Err("fence completed although rank 1 aborted".into())
}

/// Connects once with a wrong key (must be refused), then with the right one.
fn badkey() -> Result<(), String> {
    let env = steadfast_runtime::JobEnv::from_env()
        .map_err(e)?
        .ok_or("not started by a launcher")?;
    let mut wrong = env.clone();
    wrong.job_key ^= 0x5a5a;
    match Bootstrap::connect(wrong) {
        Err(BootstrapError::Rejected) => println!("ok rejected rank {}", env.rank),
        Err(other) => return Err(format!("wrong key gave {other}")),
        Ok(_) => return Err("wrong key accepted".into()),
    }
    let mut bs = Bootstrap::connect(env).map_err(e)?;
    bs.fence().map_err(e)?;
    bs.finalize().map_err(e)?;
    println!("ok accepted rank {}", bs.rank());
    Ok(())
}

/// Connects, then tries a second connection as the same rank (must be refused).
fn duplicate() -> Result<(), String> {
    let env = steadfast_runtime::JobEnv::from_env()
        .map_err(e)?
        .ok_or("not started by a launcher")?;
    let mut bs = Bootstrap::connect(env.clone()).map_err(e)?;
    match Bootstrap::connect(env) {
        Err(BootstrapError::Rejected) | Err(BootstrapError::Disconnected) => {
            println!("ok duplicate refused rank {}", bs.rank())
        }
        Err(other) => return Err(format!("second connection gave {other}")),
        Ok(_) => return Err("second connection as the same rank accepted".into()),
    }
    bs.fence().map_err(e)?;
    bs.finalize().map_err(e)?;
    Ok(())
}

/// `victim` exits with status 3 after the first fence; survivors wait for the launcher's
/// RankExited notice, then fence among themselves and finalize.
fn runthrough(victim: u32) -> Result<(), String> {
    let mut bs = connect()?;
    bs.fence().map_err(e)?;
    if bs.rank() == victim {
        std::process::exit(3);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = bs.poll_events();
        let seen = events.iter().find_map(|ev| match ev {
            LauncherEvent::RankExited {
                rank,
                status,
                finalized,
            } if *rank == victim => Some((*status, *finalized)),
            _ => None,
        });
        if let Some((status, finalized)) = seen {
            if status != ExitStatus::Exited(3) || finalized {
                return Err(format!(
                    "unexpected notice {status:?} finalized={finalized}"
                ));
            }
            println!("ok rank {} saw rank {victim} exit with status 3", bs.rank());
            break;
        }
        if events.contains(&LauncherEvent::Disconnected) {
            return Err("launcher connection lost".into());
        }
        if Instant::now() > deadline {
            return Err("no RankExited notice".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    bs.fence().map_err(e)?;
    bs.finalize().map_err(e)?;
    println!("ok survivor {} finalized", bs.rank());
    Ok(())
}

/// Sends junk on three raw connections (the launcher must refuse and count them, and
/// keep serving), then bootstraps normally.
fn garbage() -> Result<(), String> {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    let env = steadfast_runtime::JobEnv::from_env()
        .map_err(e)?
        .ok_or("not started by a launcher")?;
    let junk: [&[u8]; 3] = [
        b"GET / HTTP/1.0\r\n\r\n",       // absurd length prefix
        &[0, 0, 0, 5, 0xee, 1, 2, 3, 4], // well framed, unknown message
        b"",                             // connect and hang up
    ];
    for bytes in junk {
        let mut s = TcpStream::connect(env.control).map_err(|err| err.to_string())?;
        s.write_all(bytes).map_err(|err| err.to_string())?;
        if !bytes.is_empty() {
            // The launcher closes without answering.
            let mut buf = [0u8; 16];
            match s.read(&mut buf) {
                Ok(0) | Err(_) => {}
                Ok(n) => return Err(format!("launcher answered junk with {n} bytes")),
            }
        }
    }
    let mut bs = Bootstrap::connect(env).map_err(e)?;
    bs.fence().map_err(e)?;
    bs.finalize().map_err(e)?;
    println!("ok garbage rank {}", bs.rank());
    Ok(())
}

/// Times `rounds` back-to-back fences (rank 0 prints the mean).
fn fences(rounds: u32) -> Result<(), String> {
    let mut bs = connect()?;
    bs.fence().map_err(e)?;
    let t0 = Instant::now();
    for _ in 0..rounds {
        bs.fence().map_err(e)?;
    }
    let per = t0.elapsed().as_secs_f64() * 1e6 / f64::from(rounds.max(1));
    bs.finalize().map_err(e)?;
    if bs.rank() == 0 {
        println!(
            "ok fences {rounds} over {} ranks: {per:.0} us each",
            bs.size()
        );
    }
    Ok(())
}
