"""Rebuild the bundled Parquet files from the raw CSVs (maintainers only, run by hand).

Nothing in vsplit calls this module at run time and no test reads the raw CSVs: the Parquet files it writes
are committed. Run it from the repository root with the folder that holds the raw copies::

    python -m vsplit.datasets.build --source /work/shared/datasets

For each data set it checks the CSV's sha256 against the value recorded in that folder's PROVENANCE.md and the
row and column counts against the published ones, keeps every cell's value as it is (strings stay strings,
integers stay integers), writes zstd-compressed Parquet, and rewrites the generated block of the folder's
README.md (file, sha256, counts, label balance, column types) from the data it just wrote.

Example:
    >>> SOURCES["bank"].shape
    (4521, 17)
    >>> label_balance(pd.DataFrame({"y": ["yes", "no", "no", "no"]}), label="y", positive="yes")
    (1, 4, 25.0)
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from vsplit.errors import ConfigError, DataError

HERE = Path(__file__).parent
BEGIN, END = "<!-- build.py:begin -->", "<!-- build.py:end -->"


@dataclass(frozen=True)
class Source:
    """Where one bundled data set comes from and what it must look like."""

    csv: str  # path below --source
    target: str  # path below datasets/
    sha256: str  # as recorded in PROVENANCE.md
    shape: tuple[int, int]  # as published (rows, columns)
    label: str  # label column after renaming
    positive: str | int
    sep: str = ","
    rename: dict[str, str] = field(default_factory=dict)


SOURCES: dict[str, Source] = {
    "bank_full": Source(
        csv="bank_marketing/bank-full.csv",
        target="bank_marketing/bank_full.parquet",
        sha256="d1513ec63b385506f7cfce9f2c5caa9fe99e7ba4e8c3fa264b3aaf0f849ed32d",
        shape=(45211, 17),
        label="y",
        positive="yes",
        sep=";",
    ),
    "bank": Source(
        csv="bank_marketing/bank.csv",
        target="bank_marketing/bank.parquet",
        sha256="dc8d576e9bda0f41ee891251bd84bab9a39ce576cba715aac08adc2374a01fde",
        shape=(4521, 17),
        label="y",
        positive="yes",
        sep=";",
    ),
    "default_credit": Source(
        csv="default_credit_card_clients/UCI_Credit_Card.csv",
        target="default_credit/default_credit.parquet",
        sha256="a0f0ab49d6326671d6cd83be5c88dcf18007025fe9a53ecd699119c871176ca1",
        shape=(30000, 25),
        label="default",
        positive=1,
        rename={"default.payment.next.month": "default"},
    ),
}


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def label_balance(df: pd.DataFrame, *, label: str, positive: str | int) -> tuple[int, int, float]:
    """Return (positives, rows, percent positive rounded to 3 decimals)."""
    positives = int((df[label] == positive).sum())
    return positives, len(df), round(100 * positives / len(df), 3)


def _whole_numbers_to_int(df: pd.DataFrame, where: str) -> pd.DataFrame:
    """Store float columns that only hold whole numbers as int64.

    UCI_Credit_Card.csv writes some amounts in scientific notation (``5e+05``), so pandas reads those columns
    as float; every value is a whole number, as in UCI's original spreadsheet.
    """
    out = df.copy()
    for column in out.select_dtypes("float").columns:
        values = out[column]
        if values.isna().any() or not (values == values.round()).all() or values.abs().max() >= 2**53:
            raise DataError(f"{where}: column {column!r} holds non-whole numbers; keep it float in build.py")
        out[column] = values.astype("int64")
    return out


def convert(name: str, source_dir: Path) -> pd.DataFrame:
    """Read, check and return one data set from its raw CSV below ``source_dir``."""
    spec = SOURCES[name]
    path = source_dir / spec.csv
    if not path.is_file():
        raise ConfigError(f"{path} not found; pass --source pointing at the folder that holds {spec.csv}")
    digest = sha256_of(path)
    if digest != spec.sha256:
        raise DataError(f"{path}: sha256 {digest} differs from PROVENANCE.md ({spec.sha256}); wrong file?")
    df = pd.read_csv(path, sep=spec.sep)
    if df.shape != spec.shape:
        raise DataError(f"{path}: shape {df.shape} differs from the published {spec.shape}")
    if df.isna().any().any():
        raise DataError(f"{path}: has missing cells; the published data set has none")
    df = _whole_numbers_to_int(df.rename(columns=spec.rename), str(path))
    return df


def summary(name: str, df: pd.DataFrame) -> str:
    """Return the Markdown block describing one converted data set (verified numbers only)."""
    spec = SOURCES[name]
    positives, rows, percent = label_balance(df, label=spec.label, positive=spec.positive)
    types = ", ".join(f"`{column}` ({_type_name(df[column])})" for column in df.columns)
    renamed = "".join(f"; column `{old}` renamed to `{new}`" for old, new in spec.rename.items())
    return (
        f"### `{name}`: `{Path(spec.target).name}`\n\n"
        f"- Source: `{Path(spec.csv).name}` (sha256 `{spec.sha256}`){renamed}\n"
        f"- Rows x columns: {rows} x {df.shape[1]}, no missing cells\n"
        f"- Label `{spec.label}`: {positives} positive ({spec.positive!r}) of {rows} = {percent} %, "
        f"{rows - positives} negative\n"
        f"- Columns: {types}\n"
    )


def _type_name(column: pd.Series) -> str:
    return "string" if pd.api.types.is_string_dtype(column) else str(column.dtype)


def _rewrite_readme(folder: Path, blocks: list[str]) -> None:
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise DataError(f"{readme}: add the lines {BEGIN} and {END} where the generated block goes")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{BEGIN}\n" + "\n".join(blocks) + f"{END}{tail}", encoding="utf-8")


def build(source_dir: Path, *, out_dir: Path = HERE) -> dict[str, pd.DataFrame]:
    """Convert every data set, write Parquet and README blocks below ``out_dir``, return the tables."""
    tables = {name: convert(name, source_dir) for name in SOURCES}
    blocks: dict[Path, list[str]] = {}
    for name, df in tables.items():
        target = out_dir / SOURCES[name].target
        target.parent.mkdir(parents=True, exist_ok=True)
        # Dictionary encoding pays off for the text columns only; plain int64 compresses better under zstd.
        text_columns = [column for column in df.columns if pd.api.types.is_string_dtype(df[column])]
        df.to_parquet(
            target, engine="pyarrow", compression="zstd", compression_level=19, use_dictionary=text_columns,
            index=False,
        )
        written = pd.read_parquet(target)
        pd.testing.assert_frame_equal(written, df)
        blocks.setdefault(target.parent, []).append(summary(name, written))
    for folder, folder_blocks in blocks.items():
        _rewrite_readme(folder, folder_blocks)
    return tables


def main(argv: list[str] | None = None) -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="folder holding the raw CSV copies")
    args = parser.parse_args(argv)
    for name, df in build(args.source).items():
        spec = SOURCES[name]
        positives, rows, percent = label_balance(df, label=spec.label, positive=spec.positive)
        print(f"{name}: {rows} x {df.shape[1]}, {positives} positive ({percent} %) -> {spec.target}")


if __name__ == "__main__":
    main()
