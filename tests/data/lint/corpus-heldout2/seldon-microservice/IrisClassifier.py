import joblib


class IrisClassifier:
    def __init__(self) -> None:
        self.model = joblib.load("iris_model.joblib")

    def predict(self, X, features_names=None):
        return self.model.predict_proba(X)
