"""The steps after a linear layer that fold into its weight and bias, as the importer records them
(kernelgen.importer.Chains) and the module swap finds them (examples/torch_extension/swap.py): a
permutation of the output's dimensions, and a product with a factor that varies along the
channels only (ConvNeXt's layer scale). Pure Python: shapes and arguments, no torch."""


def permutation(args: tuple, kwargs: dict, rank: int) -> list | None:
    """The dimensions of a permute call on a tensor of ``rank`` dimensions, from its arguments after
    the tensor (``torch.permute(t, dims)``, ``t.permute(dims)``, ``t.permute(*dims)``, ``dims=``
    given by keyword), where they are a permutation of its dimensions (whole numbers), else None."""
    dims = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args or kwargs.get("dims")
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return None
    return [int(d) for d in dims] if sorted(dims) == list(range(rank)) else None


def per_channel(shape: tuple, sizes: tuple, axis: int) -> bool:
    """Whether a factor of ``sizes``, broadcast against a value of ``shape``, varies along dimension
    ``axis`` (the channels) only: one value a channel, or one for all."""
    if len(sizes) > len(shape):
        return False
    sizes = (1,) * (len(shape) - len(sizes)) + tuple(sizes)
    return all(size == 1 for i, size in enumerate(sizes) if i != axis) and sizes[axis] in (1, shape[axis])
