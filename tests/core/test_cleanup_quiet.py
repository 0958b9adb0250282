"""cleanup removes quietly what is already gone, and says what it could not remove."""

from __future__ import annotations


def test_removing_what_is_already_gone_says_nothing() -> None:
    """The SDK raises ImageNotFound (a NotFound) for an image a stage already released:
    removing it again at the end of the run is no error and no warning line."""
    from servelab import cleanup

    class NotFound(Exception):  # the SDK's names and hierarchy, without the SDK
        pass

    class ImageNotFound(NotFound):
        pass

    def gone() -> None:
        raise ImageNotFound("404 Client Error: No such image")

    def broken() -> None:
        raise RuntimeError("500 Server Error")

    errors: list[str] = []
    cleanup._quiet("image x", gone, errors)
    assert errors == []
    cleanup._quiet("image y", broken, errors)
    assert len(errors) == 1 and "image y" in errors[0]
