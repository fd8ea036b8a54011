"""Lesson 00 (welcome): its exercises and the reference trace it replays."""
