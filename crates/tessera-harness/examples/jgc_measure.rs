// scratch (not committed): janus-tpcc base spec at N clients
fn main() {
    let clients: u32 = std::env::args().nth(1).unwrap().parse().unwrap();
    let e = tessera_harness::experiment::find("janus-tpcc").unwrap();
    let mut s = e.base.clone();
    s.protocol = "janus".into();
    s.clients = clients as _;
    let t = std::time::Instant::now();
    let out = tessera_harness::run_bench(&s).unwrap();
    let neworders: f64 = out
        .row
        .by_type
        .iter()
        .filter(|t| t.name == "neworder")
        .map(|t| t.throughput_tps)
        .sum();
    println!("clients {clients} wall {:.1}s txn/s {:.0} neworders/s {:.0} commit {} attempts {} counters {:?}",
        t.elapsed().as_secs_f64(), out.row.throughput_tps, neworders, out.row.committed, out.row.attempts, out.raw.counters);
}
