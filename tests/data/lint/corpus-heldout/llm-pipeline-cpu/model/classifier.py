class Classifier:
    pass
