from retrying import retry

from sagemaker_huggingface_inference_toolkit import mms_model_server


def _retry_if_error(exception):
    return isinstance(exception, (ConnectionError, OSError))


@retry(stop_max_delay=1000 * 30, retry_on_exception=_retry_if_error)
def _start_mms():
    mms_model_server.start_model_server()


def main():
    _start_mms()
