def load(): pass
