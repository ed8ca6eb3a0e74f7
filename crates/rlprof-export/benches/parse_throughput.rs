//! Parser throughput benchmark (filled in below).
fn main() {}
