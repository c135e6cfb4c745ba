import tomllib


def load(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


if __name__ == "__main__":
    cfg = load("config.toml")
    print(f"listening on {cfg['server']['host']}:{cfg['server']['port']}")
