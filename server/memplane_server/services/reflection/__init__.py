"""The reflection wing: Reflect, consolidation, foresight, the triggers that start
reflections and the task outcomes that move confidence."""
