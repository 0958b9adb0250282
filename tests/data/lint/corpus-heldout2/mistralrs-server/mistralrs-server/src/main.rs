fn main() {
    println!("mistralrs-server placeholder");
}
