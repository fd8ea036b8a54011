"""Drawing a Trace: the timeline, its marks and labels (marks), its colours (palette), and saving the picture (image)."""
