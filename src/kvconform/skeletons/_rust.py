from kvconform.skeletons import Plan


def render(chosen: Plan) -> tuple[dict[str, str], str, str]:
    raise NotImplementedError
