"""``python -m loaderexp.sync <sweep folder>``: import into MLflow the results a sweep could not log."""

from loaderexp.track.sync import main

if __name__ == "__main__":
    main()
