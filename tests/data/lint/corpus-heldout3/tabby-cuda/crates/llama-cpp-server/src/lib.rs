// Supervises the bundled llama-server process used for inference.
pub fn start() {}
