"""Language model management (argostranslate packages)."""
from argostranslate import package


def boot(load_only=None, update_models=False):
    try:
        check_and_install_models(load_only_lang_codes=load_only, update=update_models)
    except Exception as e:
        print("Cannot update models (normal if you're offline): %s" % str(e))


def check_and_install_models(force=False, load_only_lang_codes=None, update=False):
    if len(package.get_installed_packages()) < 2 or force or update:
        print("Updating language models")
        package.update_package_index()
        available = package.get_available_packages()
        if load_only_lang_codes is not None:
            available = [p for p in available
                         if p.from_code in load_only_lang_codes and p.to_code in load_only_lang_codes]
        for pack in available:
            print(f"Downloading {pack} ({pack.package_version}) ...")
            package.install_from_path(pack.download())
