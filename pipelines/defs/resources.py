"""Where the landing folder and the warehouse are (env ``FAULTLINE_LANDING``,
``FAULTLINE_WAREHOUSE``; else ``./landing`` and ``./warehouse``)."""

import os
from pathlib import Path

import dagster as dg
import polars as pl

from ..analytics.prices import default_location
from ..classify.ruleset import load_ruleset
from ..ingest import landing
from ..ingest.landing import Discovery, Partition
from ..ingest.partition import PartitionTables, ingest_partition
from ..lake import compact, views
from ..lake import files as lake
from ..lake import writer as lake_writer


class LandingResource(dg.ConfigurableResource):
    """The landing folder (read only) and the rule data used to read it."""

    path: str
    models_dir: str | None = None  # rule data in the faultline.models layout; None: shipped

    def root(self) -> Path:
        return landing.landing_root(self.path)  # an ObjectPath for an s3://... landing

    def discover(self) -> Discovery:
        return landing.discover(self.path)

    def fingerprint(self, part: Partition) -> dict[str, list[int]]:
        return landing.fingerprint(self.path, part)

    def ingest(self, part: Partition) -> PartitionTables:
        return ingest_partition(self.path, part.provider, part.cluster, part.date, rs=load_ruleset(self.models_dir))

    def inventory(self) -> tuple[pl.DataFrame, list[str]]:
        """The inventory and its row problems (``landing.load_inventory``)."""
        return landing.load_inventory(self.path)


class LakeResource(dg.ConfigurableResource):
    """The warehouse folder: the Parquet lake, the analytics tables and the DuckDB view file,
    and the prices.csv the cost analytics read (it may not exist: then no dollars)."""

    warehouse: str
    prices: str | None = None

    def writer(self) -> "PartitionLake":
        """Writes on background threads (``lake_writer.PartitionWriter``): a context manager."""
        return PartitionLake(self.warehouse)

    def read(self, table: str, part: Partition) -> pl.DataFrame:
        """A partition of a table (from memory when this process just wrote that file)."""
        return lake_writer.read(self.warehouse, table, part.provider, part.cluster, part.date)

    def data_file(self, table: str, part: Partition) -> Path:
        return lake.partition_dir(self.warehouse, table, part.provider, part.cluster, part.date) / lake.DATA_FILE

    def file_schema(self, table: str, part: Partition) -> pl.Schema | None:
        return lake.file_schema(self.warehouse, table, part.provider, part.cluster, part.date)

    def publish(self) -> tuple[compact.CompactReport, views.BuildReport]:
        """Compact closed months (cheap when nothing changed), then rebuild the view file."""
        return views.publish(self.warehouse)

    def build_views(self) -> views.BuildReport:
        return views.build(self.warehouse)


class PartitionLake(lake_writer.PartitionWriter):
    """``PartitionWriter`` taking a ``Partition``."""

    def write(self, frames: dict[str, pl.DataFrame], part: Partition) -> dict[str, Path]:
        """One partition's tables, all or none, on a background thread."""
        return super().write(frames, part.provider, part.cluster, part.date)


def from_env() -> dict[str, dg.ConfigurableResource]:
    return {
        "landing": LandingResource(
            path=os.environ.get("FAULTLINE_LANDING", "./landing"), models_dir=os.environ.get("FAULTLINE_MODELS") or None
        ),
        "lake": LakeResource(
            warehouse=os.environ.get("FAULTLINE_WAREHOUSE", "./warehouse"),
            prices=default_location(os.environ.get("FAULTLINE_LANDING", "./landing")),
        ),
    }


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=from_env())
