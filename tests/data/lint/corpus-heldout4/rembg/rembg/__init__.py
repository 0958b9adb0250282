from .bg import remove, new_session

__all__ = ["remove", "new_session"]
