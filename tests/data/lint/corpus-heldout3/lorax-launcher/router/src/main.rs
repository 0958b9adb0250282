// HTTP front of the LoRAX shards: batching, adapter routing, OpenAI-compatible routes.
fn main() {
    println!("lorax-router");
}
