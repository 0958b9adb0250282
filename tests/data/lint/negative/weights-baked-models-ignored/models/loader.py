def load(path):
    return path
