from modules import launch_utils


def main() -> None:
    launch_utils.prepare_environment()
    launch_utils.start()


if __name__ == "__main__":
    main()
