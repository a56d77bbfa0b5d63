use steadfast_sim::*;
struct D { left: Vec<u8>, p: u32 }
impl Population for D {
    type Msg = u8;
    fn procs(&self) -> u32 { self.p }
    fn handle(&mut self, _r: u32, _now: u64, _f: u32, _m: u8) {}
    fn handle_timeout(&mut self, _r: u32, _now: u64) {}
    fn poll_transmit(&mut self, r: u32, _now: u64) -> Option<(u32, u8)> {
        let l = &mut self.left[r as usize];
        if *l == 0 { return None; }
        *l -= 1;
        Some(((r + self.p - 1 - *l as u32) % self.p, 0))
    }
    fn poll_timeout(&self, _r: u32) -> Option<u64> { None }
}
fn main() {
    let p = 65536;
    let mut e: Engine<LogP, u8> = Engine::new(LogP::new(LogPParams { l: 2, o: 1, g: 0 }));
    let mut ts = vec![];
    for _ in 0..100 {
        let mut d = D { left: vec![6; p as usize], p };
        e.prepare(p, 0);
        let t = steadfast_sim::cputime::thread_cpu_time();
        let out = e.run(&mut d, 1000);
        ts.push((steadfast_sim::cputime::thread_cpu_time() - t).as_secs_f64() * 1e3);
        assert_eq!(out.sends, 6 * p as u64);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("engine floor: {:.3} ms for {} msgs", ts[50], 6 * p);
}
