"""The discrete-event simulator: workloads, supply and the simulation loop."""
