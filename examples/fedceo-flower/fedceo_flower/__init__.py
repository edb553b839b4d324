"""FedCEO on Flower's deployment runtime (SuperLink + SuperNodes): a ServerApp and a ClientApp."""
