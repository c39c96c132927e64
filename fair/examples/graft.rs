// Throwaway: MAIN.onnx's network with COMMITTED.json as its network for committed choices.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let m = slurp_fair::Model::load(std::path::Path::new(&a[1]), None).unwrap();
    let c: Vec<slurp_fair::export::Dense> =
        serde_json::from_str(&std::fs::read_to_string(&a[2]).unwrap()).unwrap();
    let notes = vec![slurp_fair::export::committed_note(&c)];
    std::fs::write(
        &a[4],
        slurp_fair::export::actor(&m.layers().unwrap(), &a[3], &notes),
    )
    .unwrap();
}
