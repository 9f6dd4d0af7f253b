from resumable.cli.main import launch

launch()
