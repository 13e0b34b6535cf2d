"""Values kept for the rest of a process by the identity of the objects they are made from: a
kernel's generated source by its template lookup and descriptor, a descriptor's cost-model
attributes, a model's terms for a descriptor. A descriptor's fields are frozen and a lookup is kept
while its folder's files are the same, so what was made of them once holds while they live."""


class ByIdentity:
    """``make(*objects)``, kept by the objects' ids, with the objects kept beside the value (an id
    is then never reused by another object while its entry stands); at most ``most`` values, all of
    them dropped when that many are kept."""

    def __init__(self, most: int):
        self.most, self.values = most, {}

    def get(self, make, *objects):
        key = tuple(map(id, objects))
        kept = self.values.get(key)
        if kept is None or any(a is not b for a, b in zip(kept[0], objects)):
            if len(self.values) >= self.most:
                self.values.clear()
            kept = self.values[key] = (objects, make(*objects))
        return kept[1]
