// Throwaway: a model's main network's layers as JSON.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let m = slurp_fair::Model::load(std::path::Path::new(&a[1]), None).unwrap();
    println!("{}", serde_json::to_string(&m.layers().unwrap()).unwrap());
}
