"""Finding dataset files on disk, or downloading them with pinned hashes.

Two modes, decided once per call:

- a data directory is given (``data_dir=`` or the ``BNNKIT_DATA_DIR`` environment variable): files
  are read from ``<data dir>/<folder>/`` and nothing is ever downloaded; a missing file is a
  one-line :class:`~bnnkit.errors.ConfigError` saying which file to put where;
- otherwise files are looked up in, or downloaded by pooch into, the cache
  ``$BNNKIT_CACHE_DIR/<folder>/`` (default ``pooch.os_cache("bnnkit")``). Every download is checked
  against the hash pinned in :mod:`bnnkit.data.sources`; a mismatch is a ConfigError naming the
  file, and pooch's temporary download is removed so no partial file is left in the cache.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bnnkit.data.sources import REMOTES, Remote
from bnnkit.errors import ConfigError

DATA_DIR_ENV = "BNNKIT_DATA_DIR"
CACHE_DIR_ENV = "BNNKIT_CACHE_DIR"


class UnreachableError(ConfigError):
    """No URL of a file could be reached (offline, or every mirror down).

    Attributes:
        accepted: the file(s) the message asks for.
        reasons: one short reason per URL tried.
    """

    def __init__(self, folder: str, accepted: str, reasons: Sequence[str]):
        self.accepted, self.reasons = accepted, tuple(reasons)
        super().__init__(offline_message(folder, accepted, self.reasons))


def offline_message(folder: str, accepted: str, reasons: Sequence[str]) -> str:
    """The one line for files that could not be downloaded: what to put where instead.

    Example:
        >>> offline_message("demo", "a.bin", ["https://x/a.bin: ConnectionError"] * 2)
        'could not download demo (ConnectionError from 2 URLs; offline?): put a.bin in \
<data dir>/demo/ and set BNNKIT_DATA_DIR=<data dir>'
    """
    kinds = ", ".join(dict.fromkeys(r.rsplit(": ", 1)[-1] for r in reasons)) or "no URL"
    return (
        f"could not download {folder} ({kinds} from {len(reasons)} URL"
        f"{'s' if len(reasons) != 1 else ''}; offline?): put {accepted} in "
        f"<data dir>/{folder}/ and set {DATA_DIR_ENV}=<data dir>"
    )


def data_root(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The directory of files already on disk: ``data_dir`` or ``$BNNKIT_DATA_DIR``, else None.

    Raises:
        ConfigError: the directory does not exist.
    """
    chosen = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    if chosen is None:
        return None
    root = Path(chosen).expanduser()
    if not root.is_dir():
        source = "data_dir" if data_dir is not None else DATA_DIR_ENV
        raise ConfigError(f"{source} {str(root)!r} is not a directory; allowed: an existing folder")
    return root


def cache_root() -> Path:
    """The download cache: ``$BNNKIT_CACHE_DIR`` or ``pooch.os_cache("bnnkit")``."""
    chosen = os.environ.get(CACHE_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser()
    import pooch

    return Path(pooch.os_cache("bnnkit"))


def find_local(folder: str, names: Sequence[str], root: Path) -> Path | None:
    """The first of ``names`` that exists under ``root/folder`` (files or folders), else None."""
    for name in names:
        path = root / folder / name
        if path.exists():
            return path
    return None


def download(folder: str, remote: Remote, *, cache: Path | None = None) -> Path:
    """Download one file into ``<cache>/<folder>/`` unless a copy with the right hash is there.

    The canonical URL is tried first, then the mirrors. The file only appears under its final name
    after its hash matched.

    Args:
        folder: the dataset's folder name (``"mnist"``).
        remote: the file, its URLs and pinned hash.
        cache: cache root; default :func:`cache_root`.

    Returns:
        The path of the verified file.

    Raises:
        ConfigError: hash mismatch (naming the file) or no URL reachable (saying where to put it).

    Example:
        (Downloads the Keras ``mnist.npz``; doctests do not use the network.)

        >>> path = download("mnist", REMOTES["mnist"][0])  # doctest: +SKIP
    """
    import logging

    import pooch

    target = (cache or cache_root()) / folder
    errors = []
    # pooch announces each attempt on its logger; what matters (success, or one line saying
    # what to put where) is said by bnnkit.
    pooch.get_logger().setLevel(logging.WARNING)
    for url in remote.urls:
        try:
            return Path(
                pooch.retrieve(
                    url,
                    known_hash=remote.known_hash,
                    fname=remote.filename,
                    path=target,
                    progressbar=False,
                )
            )
        except ValueError as err:
            if "hash" in str(err).lower():
                _remove_partial(target, remote.filename)
                raise ConfigError(
                    f"checksum mismatch for {remote.filename} downloaded from {url}: expected "
                    f"{remote.known_hash}; the file was discarded"
                ) from None
            errors.append(f"{url}: {err}")
        except Exception as err:  # network errors come from requests, urllib3, ftplib, ...
            errors.append(f"{url}: {type(err).__name__}")
    raise UnreachableError(folder, remote.filename, errors)


def download_all(
    folder: str,
    remotes: Sequence[Remote],
    *,
    cache: Path | None = None,
    accepted: str | None = None,
) -> list[Path]:
    """Download every file of ``remotes``, or leave nothing behind and name them all.

    Args:
        folder: the dataset's folder name.
        remotes: the files.
        cache: cache root; default :func:`cache_root`.
        accepted: what to name in the offline error (default: every file of ``remotes``).

    Raises:
        ConfigError: a checksum mismatch, or (:class:`UnreachableError`, offline) one line naming
            ``accepted`` and where to put it; folders this call created are removed again.
    """
    target = (cache or cache_root()) / folder
    created = [d for d in (target, *target.parents) if not d.exists()]
    try:
        return [download(folder, remote, cache=cache) for remote in remotes]
    except UnreachableError as err:
        remove_empty(created)
        names = accepted or ", ".join(r.filename for r in remotes)
        raise UnreachableError(folder, names, err.reasons) from None
    except ConfigError:
        remove_empty(created)
        raise


def remove_empty(folders: Sequence[Path]) -> None:
    """Remove those of ``folders`` that are empty, deepest first (what a failed download made)."""
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _remove_partial(target: Path, filename: str) -> None:
    # pooch writes to a temporary file and renames it after the hash check; make sure neither a
    # temporary nor a file under the final name survives a failed check.
    final = target / filename
    if final.exists():
        final.unlink()
    if target.is_dir():
        for leftover in target.glob("tmp*"):
            if leftover.is_file():
                leftover.unlink()


def locate(
    folder: str,
    local_names: Sequence[str],
    *,
    data_dir: str | os.PathLike | None = None,
    remotes: Sequence[Remote] | None = None,
    what: str | None = None,
) -> Path:
    """Find a dataset file (or extracted folder) on disk, downloading it when allowed.

    Args:
        folder: the dataset's folder under the data directory / cache.
        local_names: accepted names in order of preference (the first found wins).
        data_dir: explicit data directory; default ``$BNNKIT_DATA_DIR``; when set nothing is
            downloaded.
        remotes: files to download when there is no data directory (the first one is returned);
            default ``REMOTES[folder]``.
        what: how to describe the missing files in the error message; default the first name.

    Returns:
        The path found or downloaded.

    Raises:
        ConfigError: nothing found in the data directory, no download source, or a failed
            download.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> (root / "mnist").mkdir()
        >>> (root / "mnist" / "mnist.npz").touch()
        >>> path = locate("mnist", ["train-images-idx3-ubyte.gz", "mnist.npz"], data_dir=root)
        >>> path.relative_to(root)
        PosixPath('mnist/mnist.npz')
    """
    root = data_root(data_dir)
    remotes = REMOTES.get(folder, ()) if remotes is None else remotes
    wanted = what or local_names[0]
    if root is not None:
        found = find_local(folder, local_names, root)
        if found is None:
            hint = f" (public source: {remotes[0].urls[0]})" if remotes else ""
            raise ConfigError(f"{wanted} not found: put it in {root / folder}/{hint}")
        return found
    cache = cache_root()
    found = find_local(folder, local_names, cache)
    if found is not None:
        return found
    if not remotes:
        raise ConfigError(
            f"{wanted} has no public download; put it in <data dir>/{folder}/ and set "
            f"{DATA_DIR_ENV}=<data dir>"
        )
    return download_all(folder, remotes, cache=cache, accepted=what)[0]
