"""servelab.image: everything that reads or names an image.

* :mod:`~servelab.image.ref`: the one image-reference type (:class:`ImageRef`) and the one
  digest pattern (:data:`DIGEST`, :func:`is_digest`, :func:`pinned_digest`). A digest-format
  fix goes there.
* :mod:`~servelab.image.blob`: the verified blob reader: every blob hashed and sized against
  its descriptor while it streams, layers decompressed under size and expansion caps.
* :mod:`~servelab.image.oci`: OCI archives, layouts, engine images and registry images behind
  one :class:`ImageSource` (:func:`open_image`).
* :mod:`~servelab.image.registry`: the OCI distribution client; :mod:`~servelab.image.push`
  pushes the exact tested archive.
* :mod:`~servelab.image.platforms`, :mod:`~servelab.image.layout`: one platform of a
  multi-platform image, and the unpacked layout Trivy reads.
* :mod:`~servelab.image.listing`: what a layer holds (file names and sizes), indexed from
  bytes another pass reads anyway, so a multi-GB layer is not inflated twice.
* :mod:`~servelab.image.diff` (what differs between two images; a layer's tar entries are
  read by :mod:`~servelab.image.entries`), :mod:`~servelab.image.pin`
  (pin ``FROM`` lines), :mod:`~servelab.image.render` (their text, Markdown and JSON).

Names are imported on first use, so importing this package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.image.blob import BlobReader, Limits
    from servelab.image.diff import DiffResult, diff_images
    from servelab.image.layout import ImageInput, prepared_input
    from servelab.image.oci import ImageSource, OciArchive, OciLayout, open_image
    from servelab.image.pin import PinReport, pin_file
    from servelab.image.platforms import choose, host_platform
    from servelab.image.push import TestedImage, push_tested
    from servelab.image.ref import DIGEST, ImageRef, check_digest, is_digest, pinned_digest
    from servelab.image.registry import RegistryClient

_WHERE = {
    "DIGEST": "ref", "ImageRef": "ref", "check_digest": "ref", "is_digest": "ref",
    "pinned_digest": "ref", "BlobReader": "blob", "Limits": "blob", "ImageSource": "oci",
    "OciArchive": "oci", "OciLayout": "oci", "open_image": "oci", "RegistryClient": "registry",
    "TestedImage": "push", "push_tested": "push", "choose": "platforms",
    "host_platform": "platforms", "ImageInput": "layout", "prepared_input": "layout",
    "DiffResult": "diff", "diff_images": "diff", "PinReport": "pin", "pin_file": "pin",
}
__all__ = [
    "DIGEST",
    "BlobReader",
    "DiffResult",
    "ImageInput",
    "ImageRef",
    "ImageSource",
    "Limits",
    "OciArchive",
    "OciLayout",
    "PinReport",
    "RegistryClient",
    "TestedImage",
    "check_digest",
    "choose",
    "diff_images",
    "host_platform",
    "is_digest",
    "open_image",
    "pin_file",
    "pinned_digest",
    "prepared_input",
    "push_tested",
]
__getattr__ = lazy_exports(__name__, _WHERE)
