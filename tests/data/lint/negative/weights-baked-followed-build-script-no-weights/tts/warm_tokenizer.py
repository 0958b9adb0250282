from tts.text import tokenizer

if __name__ == "__main__":
    tokenizer()
