from resumable.cli import launch

launch()
