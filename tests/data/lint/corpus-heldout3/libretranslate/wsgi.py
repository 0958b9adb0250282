from libretranslate import main


def app(*args, **kwargs):
    from libretranslate.app import create_app

    return create_app(main.get_args())
