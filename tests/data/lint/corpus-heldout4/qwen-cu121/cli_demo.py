"""Terminal chat with a local Qwen-Chat checkpoint."""
if __name__ == "__main__":
    print("Qwen-Chat CLI demo")
